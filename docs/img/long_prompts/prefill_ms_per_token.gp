# cd docs/img/long_prompts && gnuplot prefill_ms_per_token.gp
# The time a prefill token costs against its position: engine_bench --prefill-chunk on the small
# model, 1 thread (columns: chunk start, chunk end, ms per token; docs/benchmarks.md has the commands).
set terminal pngcairo size 900,520 font ",11"
set output "prefill_ms_per_token.png"
set title "Small model, 1 thread, AMD EPYC 2 vCPU (AVX-512): prefill cost of a token by position"
set xlabel "position in the prompt (k tokens)"
set ylabel "ms per token"
set key top left
set grid
plot "tiled.dat" using (($1 + $2) / 2048.0):3 with linespoints lw 2 pt 7 title "indexer rows in groups, keys in blocks (quiet host)", \
     "rowwise.dat" using (($1 + $2) / 2048.0):3 with linespoints lw 2 pt 5 title "indexer row by row (quiet host)", \
     "tiled_2threads_128k.dat" using (($1 + $2) / 2048.0):3 with linespoints lw 2 pt 9 title "rows in groups to 128k, 2 threads (quiet host)", \
     "shared.dat" using (($1 + $2) / 2048.0):3 with linespoints lw 1 pt 6 dt 2 title "row by row to 128k, host shared with builds and a chaos test"
