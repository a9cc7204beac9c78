# softnet: `make demo` runs the main job, `make test` the tests. Both set the
# machine up first (idempotent): Debian packages, a virtualenv, the native tools.
PYTHON   ?= python3
VENV     := .venv
APT_PKGS := clang llvm libbpf-dev libxdp-dev libelf-dev zlib1g-dev bpftool iproute2 ethtool nftables \
            netsniff-ng iperf3 procps gcc make iputils-ping openssh-server openssh-client \
            chromium \
            slurmctld slurmd slurm-client munge  # the fleet's Slurm path, tested on a one-node Slurm
# chromium: softnet serve's pages, tested in headless Chromium (playwright drives it)
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH):/usr/sbin:/sbin

.PHONY: setup apt venv native install demo test check bench clean
PREFIX ?= /usr/local

setup: apt venv native

apt:
	@missing=$$(for p in $(APT_PKGS); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing Debian packages:" $$missing; \
		apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing; \
	fi

venv: $(VENV)/.installed $(VENV)/.launcher

# pip's entry point for softnet, replaced by one that holds signals back until softnet answers them
$(VENV)/.launcher: bin/softnet.in $(VENV)/.installed
	sed 's|@PYTHON@|$(abspath $(VENV))/bin/python|' bin/softnet.in > $(VENV)/bin/softnet
	chmod 755 $(VENV)/bin/softnet
	touch $@

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e '.[test]'
	touch $@

native: apt
	$(MAKE) -C native

# softnet on every user's PATH: a link to the virtualenv's entry point (`make uninstall`-free: rm it)
install: setup
	ln -sfn $(CURDIR)/$(VENV)/bin/softnet $(PREFIX)/bin/softnet
	@echo "softnet: $(PREFIX)/bin/softnet -> $(CURDIR)/$(VENV)/bin/softnet"

demo: setup
	$(VENV)/bin/softnet demo

# Unit tests two at a time, then the ones that change the host one at a time.
test: setup
	$(VENV)/bin/pytest -q -rsR -n 2 --dist loadfile -m "not netns"
	$(VENV)/bin/pytest -q -rsR -m netns

# The quick loop while editing: the import contract and the unit tests
# without the long end-to-end ones (marked slow) and without root.
check: venv
	$(VENV)/bin/lint-imports
	$(VENV)/bin/pytest -q -n 2 --dist loadfile -m "not netns and not slow"

bench: setup
	$(VENV)/bin/pip install -q -e '.[test,bench]'
	$(VENV)/bin/python bench/gen_bench.py
	$(VENV)/bin/python bench/search_bench.py --seeds 120
	SOFTNET_WAIT=3600 $(VENV)/bin/python bench/search_real_bench.py --repeats 10 --host-stall-loss count
	$(VENV)/bin/python bench/sampler_bench.py
	$(VENV)/bin/python bench/profile_bench.py --repeats 20
	$(VENV)/bin/python bench/profile_bench.py --repeats 8 --duty 1
	$(VENV)/bin/python bench/profile_bench.py --repeats 8 --no-per-packet
	$(VENV)/bin/python bench/stage_coverage.py --runs 6
	$(VENV)/bin/python bench/victim_check.py
	$(VENV)/bin/python bench/latency_hist_bench.py
	SOFTNET_WAIT=3600 $(VENV)/bin/python bench/xsk_stamp_bench.py
	SOFTNET_WAIT=3600 $(VENV)/bin/python bench/latency_rate_bench.py
	SOFTNET_WAIT=3600 $(VENV)/bin/python bench/restore_bench.py --repeats 10 --scenario all
	SOFTNET_WAIT=3600 $(VENV)/bin/python bench/agent_cost.py --repeats 5 --window 30
	$(VENV)/bin/python bench/soak_model.py --repeats 8 --budget 60,300,1200
	SOFTNET_WAIT=3600 $(VENV)/bin/python bench/soak_hour.py
	$(VENV)/bin/python bench/agent_start.py --repeats 10
	$(VENV)/bin/python bench/serve_start.py --repeats 10
	SOFTNET_WAIT=3600 $(VENV)/bin/python bench/restore_bench.py --repeats 5 --scenario all --nic rx_channels=1 --out bench/results/restore_nic.json
	SOFTNET_WAIT=3600 $(VENV)/bin/python bench/multigen_bench.py 5
	SOFTNET_WAIT=3600 $(VENV)/bin/python bench/traffic_bench.py 5
	SOFTNET_WAIT=3600 $(VENV)/bin/python bench/compare_bench.py --repeats 10
	SOFTNET_WAIT=3600 $(VENV)/bin/python bench/trend_false_changes.py --campaigns 10
	SOFTNET_WAIT=600 $(VENV)/bin/python bench/interrupt_sweep.py

clean:
	$(MAKE) -C native clean
