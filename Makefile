# Layercast: the two commands a new user runs are `make demo` and `make test` (see README.md).
# Both install what is missing first (scripts/setup.sh) and are safe to re-run.

.PHONY: demo test setup catalogue e2e-full rmcat bench fuzz acceptance clean-net containers soak faults capacity

demo: ## Live session with players behind emulated bottlenecks, and the dashboard
	@scripts/demo.sh $(ARGS)

test: ## Every test suite (under 30 minutes on 2 cores)
	@scripts/test.sh

setup: ## Install system packages, test media, build everything
	@scripts/setup.sh

catalogue: ## The simulator's full catalogue of published experiments (long)
	@scripts/setup.sh && target/release/layercast-sim catalogue && target/release/layercast-sim report

e2e-full: ## Every emulated-network acceptance scenario (long)
	@scripts/setup.sh && npm run -w e2e full -- $(ARGS)

rmcat: ## Issue 24's RMCAT set and TCP model check on the testbed, 5 runs each (docs/protocols/lcc.md)
	@scripts/setup.sh && npm run -w e2e full -- --only rmcat-,tcp-model-,demo --reps 5 $(ARGS)

bench: ## Criterion benchmarks of the controllers, simulator engine and codec; records the issue figures
	@scripts/setup.sh && cargo bench --workspace && node scripts/bench-record.mjs && node scripts/acceptance.mjs

soak: ## 30-minute soak, 20 players: memory growth and stuck players (docs/reliability.md)
	@scripts/setup.sh && npm run -w e2e cli -- soak $(ARGS)

faults: ## Every fault-injection test on the testbed, with its figures (docs/reliability.md)
	@scripts/setup.sh && npm run -w e2e cli -- faults $(ARGS)

capacity: ## Players one machine carries, synthetic and video (docs/reliability.md)
	@scripts/setup.sh && npm run -w e2e cli -- capacity $(ARGS)

containers: ## Build the server and player images (podman, local Debian base) and run them
	@deploy/container/build-local.sh

acceptance: ## Regenerate docs/acceptance.md from the latest measurements
	@node scripts/acceptance.mjs

clean-net: ## Remove any network namespaces a crashed run left behind
	@for ns in $$(ip netns list | awk '/^lc-/{print $$1}'); do ip netns del $$ns; done
