# cd docs/img/long_prompts && gnuplot slice_per_token.gp
# The real-width slice (bench/slice_config.sh): useful arithmetic of a prefill token against its
# position (exact, from the engine's work counters) and its time (host shared: upper bounds).
# Columns: chunk start, chunk end, ms per token[, MFLOP per token].
set terminal pngcairo size 900,520 font ",11"
set output "slice_per_token.png"
set title "Real-width slice (hidden 5120, 4 layers), Intel Xeon 2 vCPU (AVX-512, AMX): prefill cost of a token by position"
set xlabel "position in the prompt (k tokens)"
set ylabel "useful MFLOP per token"
set y2label "ms per token (host shared)"
set ytics nomirror
set y2tics
set yrange [0:6500]
set y2range [0:180]
set key top left
set grid
plot "slice_1thread_flops.dat" using (($1 + $2) / 2048.0):4 axes x1y1 with linespoints lw 2 pt 7 title "MFLOP per token (exact)", \
     3636.8 + 20.48 * x axes x1y1 with lines dt 2 title "3,637 + 20.48 x k: indexer scoring, 2.5 x 32 x 128 MAC per position", \
     "slice_2threads.dat" using (($1 + $2) / 2048.0):3 axes x1y2 with linespoints lw 1 pt 5 title "ms per token, 2 threads", \
     "slice_1thread_flops.dat" using (($1 + $2) / 2048.0):3 axes x1y2 with linespoints lw 1 pt 6 dt 3 title "ms per token, 1 thread at nice 19 beside the soak"
