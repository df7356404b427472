# bench/plots/tps.gp: TPS vs clients, one line per implementation.
# gnuplot -e "dat='...'; out='...png'; ttl='...'" tps.gp
set terminal pngcairo size 800,500 font ",10" noenhanced
set output out
set title ttl noenhanced
set xlabel "clients"
set ylabel "TPS (median)"
set logscale x 2
set xrange [0.8:10]
set xtics (1, 2, 4, 8, 16)
set yrange [0:*]
set key top left noenhanced
set grid
plot for [i=2:*] dat using 1:i with linespoints lw 2 pt 7 title columnheader(i)
