# topo_proof.gp: bench/algorithms/topo_proof.sh's measurement against coll-sim, from its CSV
# (columns: 1 placement, 2 algo, 3 size, 4 time_s, 5 min, 6 max, 7 pred_s, 8 ratio).
# Top: measured time (points, min-max bars) and coll-sim's prediction (dashed) against
# size, one panel per placement; bottom: measured / predicted, the +-15 % band shaded.
#   gnuplot -e "csv='topo_proof.csv'; png='topo_proof.png'" topo_proof.gp
if (!exists("csv")) csv = 'topo_proof.csv'
if (!exists("png")) png = 'topo_proof.png'
if (!exists("algos")) algos = 'ring tree hd ring_nodes two_level auto'
if (!exists("title")) title = 'all-reduce across 4 namespace nodes x 2 ranks, 200 Mbit/s uplinks: measured vs coll-sim'

set terminal pngcairo size 1200, 900 font 'sans,10' noenhanced
set output png
set datafile separator ','
set logscale x 2
set format x '%.0b%BB'
set grid xtics ytics lc rgb '#dddddd'
set multiplot layout 2, 2 title title font ',13'

color(a) = a eq 'ring' ? '#1971c2' : a eq 'tree' ? '#2f9e44' : a eq 'hd' ? '#f08c00' : \
           a eq 'ring_nodes' ? '#9c36b5' : a eq 'two_level' ? '#e03131' : '#495057'
pick(p, a, c) = (strcol(1) eq p && strcol(2) eq a) ? column(c) : 1/0
pname(p) = p eq 'node' ? 'ranks node by node' : 'ranks round-robin (rank r on node r mod 4)'

do for [p in 'node rr'] {
  set title pname(p)
  set logscale y 10
  set ylabel 'time per call (s)'
  set key top left box opaque font ',9'
  plot for [a in algos] csv using 3:(pick(p, a, 4)):(pick(p, a, 5)):(pick(p, a, 6)) \
         every ::1 with yerrorlines lw 2 pt 7 ps 0.7 lc rgb color(a) title a, \
       for [a in algos] csv using 3:(pick(p, a, 7)) every ::1 with lines \
         lw 1.2 dt 2 lc rgb color(a) notitle, \
       NaN with lines lw 1.2 dt 2 lc rgb '#495057' title 'coll-sim'
}
do for [p in 'node rr'] {
  set title pname(p) . ': measured / coll-sim'
  unset logscale y
  set yrange [0.5:1.8]
  set ylabel 'ratio'
  set key top left box opaque font ',9' maxrows 3
  set object 1 rect from graph 0, first 0.85 to graph 1, first 1.15 fc rgb '#e9ecef' fs solid behind
  plot for [a in algos] csv using 3:(pick(p, a, 8)) every ::1 with linespoints \
         lw 2 pt 7 ps 0.7 lc rgb color(a) title a
  unset object 1
  set yrange [*:*]
}
unset multiplot
