#!/bin/sh
# test_exports.sh -- the built component exports mca_coll_gpuring_component and
# nothing else (its code is compiled -fvisibility=hidden, Makefile.am's
# GPURING_HIDDEN): no gpuring symbol can clash with an application's or another
# library's.  GPURING_COMPONENT_DIR: where mca_coll_gpuring.so is (make check
# sets it to the build tree's .libs).
so=${GPURING_COMPONENT_DIR:-.libs}/mca_coll_gpuring.so
if ! command -v nm >/dev/null 2>&1; then
    echo "SKIP: no nm"
    exit 77
fi
if [ ! -r "$so" ]; then
    echo "FAIL: $so not found"
    echo "0 passed, 1 failed"
    exit 1
fi
exports=$(nm -D --defined-only "$so" | awk '{print $2, $3}' | sort)
if [ "$exports" = "D mca_coll_gpuring_component" ]; then
    echo "ok: $so exports the component structure alone"
    echo "1 passed, 0 failed"
    exit 0
fi
echo "FAIL: $so exports more (or other) than the component structure:"
echo "$exports" | sed 's/^/  /'
echo "0 passed, 1 failed"
exit 1
