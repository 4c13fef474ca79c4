#!/usr/bin/env bash
# Raw web data to a trained model and a report, on the sample shipped in pipelines/sample/.
# Every step is a public command; run them one by one to see what each does.
#   bash pipelines/demo.sh            (what `make demo` runs; about 10 minutes on 2 CPU cores)
# Outputs land in out/demo/ (set OUT=... to change). A rerun resumes finished steps.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out/demo}
PY=${PY:-python}
step() { printf '\n=== %s\n' "$*"; }

step "1/9 curate the reference prose (JSONL)"
$PY -m curate run pipelines/books.toml --output "$OUT/curated/books"

step "2/9 raw crawl text for the quality classifier's negative side"
$PY -m curate run pipelines/web_raw.toml --output "$OUT/raw/web" --quiet

step "3/9 train the quality classifier (curated prose vs raw crawl)"
[ -f "$OUT/quality.bin" ] || $PY -m curate train-quality --positive "$OUT/curated/books" --negative "$OUT/raw/web" --output "$OUT/quality.bin"

step "4/9 curate the web pages (WARC): extract, normalize, langid, quality rules, classifier, dedup, decontamination"
sed "s#out/demo/quality.bin#$OUT/quality.bin#" pipelines/web.toml > "$OUT/web.toml"
$PY -m curate run "$OUT/web.toml" --output "$OUT/curated/web"

step "5/9 train a tokenizer on the curated text"
[ -f "$OUT/tokenizer.model" ] || $PY -m pretrain tokenizer train --input "$OUT/curated/books" "$OUT/curated/web" --vocab-size 4096 --output "$OUT/tokenizer.model"

step "6/9 tokenize into Megatron .bin/.idx"
$PY -m pretrain tokenize --input "$OUT/curated/web" --tokenizer "$OUT/tokenizer.model" --output-prefix "$OUT/tokens/web" --workers 2
$PY -m pretrain tokenize --input "$OUT/curated/books" --tokenizer "$OUT/tokenizer.model" --output-prefix "$OUT/tokens/books" --workers 2

step "7/9 the blend"
sed "s#out/demo/#$OUT/#" data_specs/demo.toml > "$OUT/blend.toml"
$PY -m pretrain blend inspect "$OUT/blend.toml" --tokens 8.2e5

step "8/9 pretrain a small GPT on the blend"
$PY -m pretrain train --config pretrain/configs/demo.toml --set "data.tokenizer=$OUT/tokenizer.model" \
    --set "data.blend=$OUT/blend.toml" --set "data.cache_dir=$OUT/blend-cache" --set "checkpoint.dir=$OUT/checkpoints" --set "log.dir=$OUT/logs"

step "9/9 generate, export, report"
$PY -m pretrain generate --checkpoint "$OUT/checkpoints" --prompt "It is a truth universally acknowledged" --max-tokens 40 --top-k 20 --temperature 0.8 --seed 1
$PY -m pretrain export-hf "$OUT/checkpoints" "$OUT/hf"
$PY -m pretrain report --out "$OUT/report" --curated "$OUT/curated/web" "$OUT/curated/books" --logs "$OUT/logs" --checkpoint "$OUT/checkpoints" \
    --generate-prompt "And it came to pass"
$PY -m curate stats "$OUT/curated/web" > /dev/null
printf '\nreport: %s/report/index.md (funnel.png, loss.png); Hugging Face model: %s/hf\n' "$OUT" "$OUT"
