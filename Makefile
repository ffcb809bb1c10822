# amqtool: two set-up commands on a fresh machine, `make demo` and `make test` (README).
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
AMQ    := $(VENV)/bin/amqtool
DEMO   ?= demo-store
DEMO_SIZE ?= 64MiB
# The C extension is optional for users (pure-Python fallbacks), required here so a broken build is seen.
export AMQTOOL_REQUIRE_NATIVE ?= 1

.PHONY: install system-deps demo test test-fast bench fuzz clean

$(VENV)/.installed: pyproject.toml setup.py $(wildcard native/*.c native/*.h)
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip setuptools wheel
	$(VENV)/bin/pip install -q -e '.[test]'
	# An editable install leaves the sources uncompiled; with PYTHONDONTWRITEBYTECODE set (as on CI machines)
	# every run would compile them again (~0.05 s of each command's start-up, measured on verify).
	$(PY) -m compileall -q amqtool commands inspectors >/dev/null
	touch $@

install: $(VENV)/.installed

# Real components the integration tests start: Debian's ActiveMQ 5.17 broker (KahaDB and JDBC tests), PostgreSQL
# and its JDBC driver (database stores: a throwaway cluster per test session), xfsprogs
# (filesystem checks), fio (benchmarks only). Installed when root and missing; tests that need one skip
# with the reason when it cannot be had.
system-deps:
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  missing=""; \
	  [ -e /usr/share/activemq/bin/activemq.jar ] || missing="$$missing activemq"; \
	  command -v mkfs.xfs >/dev/null || missing="$$missing xfsprogs"; \
	  command -v fio >/dev/null || missing="$$missing fio"; \
	  ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing="$$missing postgresql"; \
	  [ -e /usr/share/java/postgresql.jar ] || missing="$$missing libpostgresql-jdbc-java"; \
	  if [ -n "$$missing" ]; then \
	    echo "installing:$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  fi; \
	fi

demo: install
	rm -rf $(DEMO) $(DEMO)-export
	$(AMQ) create --demo $(DEMO_SIZE) $(DEMO)
	$(AMQ) print $(DEMO) | head -40
	$(AMQ) verify $(DEMO)
	$(AMQ) compact $(DEMO)
	$(AMQ) verify $(DEMO)
	$(AMQ) export $(DEMO) -o $(DEMO)-export --format parquet --engine spark
	@echo "demo store in $(DEMO)/, its Parquet export in $(DEMO)-export/"

# Two test processes (pytest-xdist), each test file in one of them (its module fixtures built once): the
# suite mostly waits (JVMs starting, brokers, subprocesses, fsyncs), so two keep two cores busy.
TEST_WORKERS ?= 2
test: install system-deps
	$(PY) -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder tests

test-fast: install
	$(PY) -m pytest -q -p no:cacheprovider -m "not slow and not integration and not spark" tests

# Long randomised runs (not tests): each script exits non-zero on a problem; every one runs, and make fails
# after them if one did. Add a script to the list.
# fuzz_verdicts: fault campaigns, verdicts against the broker-equal loaders (issue 25): 100,000 faults, or as
# many as 30 minutes allow (its defaults); fuzz_kills: every writer killed at random instants (issue 26).
FUZZ_SCRIPTS = bench/fuzz_verdicts.py bench/fuzz_kills.py
fuzz: install
	rc=0; for f in $(FUZZ_SCRIPTS); do $(PY) $$f || rc=1; done; exit $$rc

bench: install system-deps
	for b in bench/bench_*.py; do $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) build *.egg-info $(DEMO) $(DEMO)-export
