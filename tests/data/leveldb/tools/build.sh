#!/bin/bash
# Build activemq-leveldb-store (non-replicated) from fetched sources against Debian jars.
# Prereq: apt-get install -y python3-plyvel scala libleveldb-java libhawtbuf-java libhawtdispatch-java libactivemq-java libsnappy-java libjackson2-databind-java libguava-java
#         AMQ_GIT=<bare git dir of apache/activemq>, HD_GIT=<bare git dir of fusesource/hawtdispatch>
set -euo pipefail
T=$(cd "$(dirname "$0")" && pwd)   # this tools/ directory
W=${W:?set W to a scratch directory}; J=/usr/share/java; cd $W
AMQ_COMMIT=fc0999cc8718e1ebacb1aac6e04cb170a38f8d4b   # parent of 52a2bd446a "[AMQ-7502] Remove leveldb"; module identical to tag activemq-5.16.7
rm -rf src hd work build && mkdir -p src hd build/gen build/hd-classes build/classes
git --git-dir=$AMQ_GIT archive $AMQ_COMMIT activemq-leveldb-store | tar -x -C src
git --git-dir=$HD_GIT archive hawtdispatch-project-1.22 hawtdispatch-scala/src/main | tar -x -C hd
S=src/activemq-leveldb-store/src/main
mkdir work && cp -r $S/scala work/scala && cp -r $S/java work/java
rm -rf work/scala/org/apache/activemq/leveldb/replicated work/java/org/apache/activemq/leveldb/replicated \
       work/java/org/apache/activemq/store/leveldb/ReplicatedLevelDBPersistenceAdapter.java \
       work/java/org/apache/activemq/leveldb/LevelDBStoreFactory.java
patch -p1 -d work < $T/patches.diff
# protobuf codegen (same generator the maven build used: hawtbuf-protoc type=alt)
java -cp $J/hawtbuf-protoc.jar:$J/hawtbuf-proto.jar:$J/hawtbuf.jar org.fusesource.hawtbuf.proto.compiler.AltJavaGenerator --out=build/gen $S/proto/records.proto
# hawtdispatch-scala 1.22 (not packaged in Debian) from its real sources
scalac -nowarn -d build/hd-classes -cp $J/hawtdispatch.jar $(find hd -name '*.scala')
CP=$J/activemq-broker.jar:$J/activemq-client.jar:$J/hawtbuf.jar:$J/hawtbuf-proto.jar:$J/hawtdispatch.jar:build/hd-classes:$J/leveldb.jar:$J/leveldb-api.jar:$J/jackson-databind.jar:$J/jackson-core.jar:$J/jackson-annotations.jar:$J/snappy-java.jar:$J/slf4j-api.jar:$J/geronimo-jms_1.1_spec.jar:$J/geronimo-j2ee-management-1.1-spec.jar
scalac -nowarn -d build/classes -cp "$CP" $(find work build/gen -name '*.scala' -o -name '*.java')
javac -nowarn -d build/classes -cp "$CP:build/classes:$J/scala-library.jar" $(find work build/gen -name '*.java')
jar cf build/activemq-leveldb-store-5.16-debian.jar -C build/classes .
jar cf build/hawtdispatch-scala-2.11-1.22.jar -C build/hd-classes .
RCP=$W/build/activemq-leveldb-store-5.16-debian.jar:$W/build/hawtdispatch-scala-2.11-1.22.jar:${CP//build\/hd-classes:/}:$J/scala-library.jar:$J/slf4j-simple.jar:$J/activemq-openwire-legacy.jar:$J/guava.jar
echo "$RCP" > build/runtime-classpath.txt
mkdir -p build/harness && javac -d build/harness -cp "$RCP" $T/Gen.java $T/DumpIndex.java $T/Drain.java
echo built
