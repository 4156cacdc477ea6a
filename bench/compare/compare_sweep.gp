# compare_sweep.gp: all-reduce time against message size, one panel per case (rows: bound,
# unbound; columns: shm 2 ranks, shm 4 ranks, tcp 2 ranks), one line per program, from the
# files bench/compare/compare_sweep.sh writes (DIR/sweep-CONFIG-BIND.dat: bytes, then each
# program's median time in us, "?" where it is missing).
#   gnuplot -e "dir='D'; png='P.png'; configs='shm2 shm4 tcp2'; binds='core none'; \
#     impls='ours ours_async mpi gloo_ring gloo_hd'" compare_sweep.gp
if (!exists("dir")) dir = '.'
if (!exists("png")) png = 'compare_sweep.png'
if (!exists("configs")) configs = 'shm2 shm4 tcp2'
if (!exists("binds")) binds = 'core none'
if (!exists("impls")) impls = 'ours ours_async mpi gloo_ring gloo_hd'

nc = words(configs)
nb = words(binds)
set terminal pngcairo size 480 * nc, 400 * nb font 'sans,10'
set output png
set datafile missing '?'
set key top left box opaque font ',9'
set logscale xy
set grid xtics ytics mxtics mytics lc rgb '#e0e0e0'
set xlabel 'message size (bytes)'
set ylabel 'time (us, median of rounds)'
set xtics ('8' 8, '64' 64, '1Ki' 1024, '8Ki' 8192, '64Ki' 65536, '512Ki' 524288, \
  '1Mi' 1048576, '4Mi' 4194304) rotate by 45 right font ',9'
set format y '%g'
set multiplot layout nb, nc title 'all-reduce time against size: ours against Open MPI and Gloo' font ',13'

label(i) = i eq 'ours' ? 'ours (blocking)' : i eq 'ours_async' ? 'ours (async, -z 0)' : \
  i eq 'mpi' ? 'Open MPI' : i eq 'gloo_ring' ? 'Gloo ring' : 'Gloo hd'
color(i) = i eq 'ours' ? '#e03131' : i eq 'ours_async' ? '#f08c00' : i eq 'mpi' ? '#1971c2' : \
  i eq 'gloo_ring' ? '#2f9e44' : '#7048e8'
ctitle(c) = c eq 'shm2' ? 'shm, 2 ranks' : c eq 'shm4' ? 'shm, 4 ranks on 2 cores' : 'tcp, 2 ranks'

do for [b = 1:nb] {
  do for [c = 1:nc] {
    cfg = word(configs, c)
    bd = word(binds, b)
    set title sprintf('%s, %s', ctitle(cfg), bd eq 'core' ? 'bound' : 'unbound')
    file = sprintf('%s/sweep-%s-%s.dat', dir, cfg, bd)
    plot for [i = 1:words(impls)] file using 1:(column(i + 1)) with linespoints lw 2 pt 7 \
      ps 0.7 lc rgb color(word(impls, i)) title label(word(impls, i))
  }
}
unset multiplot
