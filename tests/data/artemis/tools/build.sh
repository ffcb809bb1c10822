#!/bin/bash
# Build the store writer (Writer.java) into an artemis-oracle build ($ORACLE_DIR, built by
# ../shared/tools/artemis-oracle/build.sh from apache/activemq-artemis 6700541d4604): it adds CoreMessage and
# its persister from artemis-core-client. Two of core-client's dependencies have no Debian package (javax.json,
# jgroups), nor does one of SSLSupport's (de.dentrassi pem-keystore); the writer uses none of them, so the build
# compiles against stand-ins: shim/JsonLoader.java, and three files derived here from the fetched sources with the
# references to those libraries removed.
set -e
T=$(cd "$(dirname "$0")" && pwd)
cd "${ORACLE_DIR:?set ORACLE_DIR to a built artemis-oracle directory}"
J=/usr/share/java
rm -rf shim && cp -r "$T/shim" shim
mkdir -p shim/org/apache/activemq/artemis/json shim/org/apache/activemq/artemis/uri \
  shim/org/apache/activemq/artemis/core/remoting/impl/ssl
sed -e '/import org.apache.activemq.artemis.json.impl/d' -e 's/new Json[A-Za-z]*Impl(javax.json.JsonValue.[A-Z_]*)/null/' \
  src/artemis-commons/src/main/java/org/apache/activemq/artemis/json/JsonValue.java \
  > shim/org/apache/activemq/artemis/json/JsonValue.java
grep -v JGroups src/artemis-core-client/src/main/java/org/apache/activemq/artemis/uri/ServerLocatorParser.java \
  > shim/org/apache/activemq/artemis/uri/ServerLocatorParser.java
grep -v dentrassi src/artemis-core-client/src/main/java/org/apache/activemq/artemis/core/remoting/impl/ssl/PemSupport.java \
  > shim/org/apache/activemq/artemis/core/remoting/impl/ssl/PemSupport.java
CP=$(cat cp.txt):$J/netty-codec-http.jar:$J/netty-handler-proxy.jar:$J/netty-codec-socks.jar
echo "$CP" > cp-writer.txt
S=shim:src/artemis-commons/src/main/java:src/artemis-journal/src/main/java:src/artemis-core-client/src/main/java
javac -nowarn -proc:full -processorpath proc -cp "$CP:classes" -sourcepath $S -d classes "$T/Writer.java"
echo "built: java \$JOPTS -cp $ORACLE_DIR/classes:\$(cat $ORACLE_DIR/cp-writer.txt):$J/slf4j-nop.jar Writer ..."
