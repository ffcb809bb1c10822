# amqtool: two set-up commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
AMQ    := $(VENV)/bin/amqtool
DEMO   ?= demo-store
export AMQTOOL_REQUIRE_NATIVE ?= 1

.PHONY: venv install demo test test-fast bench clean

$(VENV)/.installed: pyproject.toml setup.py $(wildcard native/*.c native/*.h)
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip setuptools wheel
	$(VENV)/bin/pip install -q -e '.[test]'
	touch $@

install: $(VENV)/.installed

demo: install
	rm -rf $(DEMO)
	$(AMQ) create --demo 64MiB $(DEMO)
	$(AMQ) print $(DEMO) --format text | head -40
	$(AMQ) verify $(DEMO)
	$(AMQ) compact $(DEMO)
	$(AMQ) verify $(DEMO)
	$(AMQ) export $(DEMO) -o $(DEMO)-export --format parquet --engine spark --force
	@echo "demo store in $(DEMO)/, export in $(DEMO)-export/"

test: install
	$(PY) -m pytest -q -p no:cacheprovider tests

test-fast: install
	$(PY) -m pytest -q -p no:cacheprovider -m "not slow and not integration" tests

bench: install
	$(PY) bench/run_all.py

clean:
	rm -rf $(VENV) build *.egg-info $(DEMO) $(DEMO)-export
