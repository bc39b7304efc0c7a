# gnuplot amx_matmul.gp -> amx_matmul.png (data: amx_matmul.dat)
set terminal pngcairo size 900,520 font "sans,11"
set output "amx_matmul.png"
set title "FP4 expert matmul per kernel (Intel Xeon with AMX, 2 vCPU; median and range of 5 rounds)"
set xlabel "activation rows per expert matrix"
set ylabel "GFLOP/s"
set logscale x 2
set xrange [0.8:320]
set yrange [0:560]
set key top left
set grid
plot "amx_matmul.dat" using 1:2:3:4 with yerrorlines lw 2 title "canonical (fp32 FMA)", \
     "" using 1:5:6:7 with yerrorlines lw 2 title "FP4 grid, VPDPWSSD", \
     "" using 1:8:9:10 with yerrorlines lw 2 title "FP4 grid, AMX TDPBF16PS (used from 16 rows)"
