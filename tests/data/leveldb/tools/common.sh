# Sourced by the tools' scripts: where things are and how the writer's JVM is run.
TOOLS=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)        # this tools/ directory
W=${W:?set W to the build directory of build.sh}             # build.sh's scratch directory
OUT=${OUT:-/work/leveldb-stores}                             # where the stores go, one directory each
RCP="$W/build/harness:$(cat "$W/build/runtime-classpath.txt")"
# hawtdispatch and the store reach into sun.nio.ch / java.nio on JDK 17
JOPTS="--add-exports java.base/sun.nio.ch=ALL-UNNAMED --add-opens java.base/sun.nio.ch=ALL-UNNAMED --add-opens java.base/java.nio=ALL-UNNAMED --add-opens java.base/java.lang=ALL-UNNAMED"
gen() { timeout "${GEN_TIMEOUT:-300}" nice -n 10 java $JOPTS "$@"; }   # the store retries forever on errors: always under timeout
