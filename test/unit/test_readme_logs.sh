#!/bin/sh
# test_readme_logs.sh -- every log line the README quotes ("[gpuring rank N] error
# FILE:LINE: text") points at gpuring's source as it is: line LINE of FILE opens a
# GPURING_ log call (the line a real log names) whose message's first words are the
# quote's.  An edit above such a call moves it; the README's example then names a
# line that logs nothing -- a user who looks it up finds something else.
# srcdir: the source tree (make check sets it).
top=${srcdir:-.}
readme=$top/README
pass=0
fail=0
if [ ! -r "$readme" ]; then
    echo "FAIL: $readme not found"
    echo "0 passed, 1 failed"
    exit 1
fi
quotes=$(grep -oE '\[gpuring rank [0-9]+\] (error|warn|info|debug) [a-z_]+\.(c|cu):[0-9]+: .*' \
    "$readme" | sed -E 's/^\[gpuring rank [0-9]+\] [a-z]+ //')
if [ -z "$quotes" ]; then
    echo "FAIL: no log line quoted in $readme (the pattern no longer matches its examples?)"
    echo "0 passed, 1 failed"
    exit 1
fi
while IFS= read -r q; do
    file=${q%%:*}
    rest=${q#*:}
    line=${rest%%:*}
    text=${rest#*: }
    src=$(find "$top/ompi_coll_gpuring" "$top/bootstrap_mpi" "$top/graph" "$top/kernels" \
        "$top/proxy" "$top/common" -name "$file" 2>/dev/null | head -n 1)
    if [ -z "$src" ]; then
        echo "FAIL: README quotes $file:$line, and no source file is named $file"
        fail=$((fail + 1))
        continue
    fi
    if ! sed -n "${line}p" "$src" | grep -qE 'GPURING_(ERROR|WARN|INFO|DEBUG|LOG)\('; then
        echo "FAIL: README quotes $file:$line (\"$text\"); that line opens no log call:"
        sed -n "${line}p" "$src" | sed 's/^/  /'
        fail=$((fail + 1))
        continue
    fi
    # the call's first string literal; its first run of plain text (no conversion)
    # of 4 characters or more must be in the quote's first line
    fmt=$(sed -n "${line},$((line + 4))p" "$src" | tr '\n' ' ' | sed -E 's/^[^"]*"([^"]*)".*/\1/')
    word=$(printf '%s\n' "$fmt" | sed -E 's/%[-+ #0-9.*]*(hh|h|ll|l|z|j|t)?[a-zA-Z]/\n/g' |
        awk 'length($0) >= 4 { print; exit }')
    if [ -z "$word" ]; then
        echo "FAIL: README quotes $file:$line; its call's message \"$fmt\" has no plain words to compare"
        fail=$((fail + 1))
        continue
    fi
    case "$text" in
    *"$word"*)
        pass=$((pass + 1))
        ;;
    *)
        echo "FAIL: README quotes $file:$line as \"$text\"; the call there logs \"$fmt\""
        fail=$((fail + 1))
        ;;
    esac
done <<EOF
$quotes
EOF
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
