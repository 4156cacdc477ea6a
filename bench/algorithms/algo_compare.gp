# algo_compare.gp: bus bandwidth against message size, one line per algorithm, one panel
# per rank count, from the CSV that bench/algorithms/algo_compare.sh writes
# (allreduce_bench's columns: 1 size, 8 out-of-place busbw, 14 nranks, 15 algo), and,
# dashed, the cost model's busbw from its model CSV (1 size, 2 nranks, 3 algo, 5 busbw) when given.
#   gnuplot -e "csv='A.csv'; model='M.csv'; png='P.png'; ranks='2 3 4'" algo_compare.gp
if (!exists("csv")) csv = 'algo_compare.csv'
if (!exists("png")) png = 'algo_compare.png'
if (!exists("ranks")) ranks = '2 3 4'
if (!exists("algos")) algos = 'ring tree hd master'
if (!exists("title")) title = 'all-reduce bus bandwidth by algorithm'
if (!exists("model")) model = ''

npanels = words(ranks)
set terminal pngcairo size 520 * npanels, 480 font 'sans,11'
set output png
set datafile separator ','
set key top left box opaque
set logscale x 2
set grid xtics ytics lc rgb '#dddddd'
set xlabel 'message size (bytes)'
set ylabel 'busbw (GB/s)'
set format x '%.0b%BB'
set yrange [0:*]
set multiplot layout 1, npanels title title font ',14'

# One colour per algorithm, master in red: it is the one to notice.
color(a) = a eq 'ring' ? '#1971c2' : a eq 'tree' ? '#2f9e44' : a eq 'hd' ? '#f08c00' : '#e03131'
pick(n, a) = (column(14) == n && strcol(15) eq a) ? column(8) : 1/0
pick_model(n, a) = (column(2) == n && strcol(3) eq a) ? column(5) : 1/0

do for [i = 1:npanels] {
  n = int(word(ranks, i))
  set title sprintf('%d ranks', n)
  if (model ne '') {
    plot for [a in algos] csv using 1:(pick(n, a)) every ::1 with linespoints \
           lw 2 pt 7 ps 0.8 lc rgb color(a) title a, \
         for [a in algos] model using 1:(pick_model(n, a)) every ::1 with lines \
           lw 1.5 dt 2 lc rgb color(a) notitle, \
         NaN with lines lw 1.5 dt 2 lc rgb '#495057' title 'cost model'
  } else {
    plot for [a in algos] csv using 1:(pick(n, a)) every ::1 with linespoints \
         lw 2 pt 7 ps 0.8 lc rgb color(a) title a
  }
}
unset multiplot
