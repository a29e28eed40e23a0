# Layercast: the two commands a new user runs are `make demo` and `make test` (see README.md).
# Both install what is missing first (scripts/setup.sh) and are safe to re-run.

.PHONY: demo test setup catalogue e2e-full rmcat quality ladder-check bench bench-ladder fuzz acceptance clean-net containers soak faults capacity pim test-audio edge-browser edge-bench bench-control

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

quality: ## Issue 20: what viewers see (freezes, frame rate, PSNR/SSIM, latency, repairs) on clean, middle-layer, lossy, jittery and CUBIC-shared paths, ERA and PLM, 5 runs x 60 s (~20 min; ARGS='--runs 3')
	@scripts/setup.sh && { flock /tmp/layercast-heavy.lock npm run -w e2e cli -- quality-suite $(ARGS); rc=$$?; node scripts/acceptance.mjs; exit $$rc; }

ladder-check: ## Issue 19 on the testbed: viewers behind 350 kbit/s, 1 and 3 Mbit/s watch the default 720p30 encode; each must show 320x180, 640x360, 1280x720 at >= 15 fps, 3 runs x 60 s (~6 min; ARGS='--runs 1')
	@scripts/setup.sh && { flock /tmp/layercast-heavy.lock npm run -w e2e cli -- ladder-check $(ARGS); rc=$$?; node scripts/acceptance.mjs; exit $$rc; }

bench: ## Criterion benchmarks of the controllers, simulator engine and codec; records the issue figures
	@scripts/setup.sh && cargo bench --workspace && node scripts/bench-record.mjs && node scripts/acceptance.mjs

bench-ladder: ## Issue 19 on the Big Buck Bunny clip: repair/padding shares and queueing at the announced rates, BD-rate against one plain stream, encode+FEC speed (a few minutes)
	@scripts/setup.sh && cargo build --release -p layercast-codec --examples \
	  && flock /tmp/layercast-heavy.lock cargo test --release -p layercast-server --lib fill_study -- --ignored --nocapture \
	  && flock /tmp/layercast-heavy.lock target/release/examples/rd_bench \
	  && flock /tmp/layercast-heavy.lock target/release/examples/rc_study loops=7 \
	  && node scripts/acceptance.mjs

soak: ## 30-minute soak, 20 players: memory growth and stuck players (docs/reliability.md)
	@scripts/setup.sh && npm run -w e2e cli -- soak $(ARGS)

faults: ## Every fault-injection test on the testbed, with its figures (docs/reliability.md)
	@scripts/setup.sh && npm run -w e2e cli -- faults $(ARGS)

pim: ## Through FRR PIM routers: join/leave latency 1-2 hops, ERA/PLM settle+shed, sender rate 1/4/16 viewers (~8 min)
	@scripts/setup.sh && npm run -w e2e cli -- pim --frr-defaults $(ARGS)

edge-browser: ## The WebRTC edge in headless Chromium: two paths, a step 4 -> 1 -> 4 Mbit/s, 2 % loss (~4 min)
	@scripts/setup.sh && { flock /tmp/layercast-heavy.lock timeout 900 npm run -w e2e cli -- edge $(ARGS); rc=$$?; node scripts/acceptance.mjs; exit $$rc; }

edge-bench: ## Viewers one edge core serves at ~1 Mbit/s each, edge-added latency (str0m load client)
	@scripts/setup.sh && cargo bench -p layercast-edge-core --bench viewers --no-run \
	  && flock /tmp/layercast-heavy.lock timeout 900 cargo bench -p layercast-edge-core --bench viewers -- $(ARGS) && node scripts/acceptance.mjs

bench-control: ## Issue 23: 10,000 UDP-reporting viewers + 50 dashboards (control-plane CPU, RSS, update p99); 1,000 HTTPS clients at once (~2 min)
	@scripts/setup.sh && . scripts/features.sh && cargo test --release -p layercast-server --features research --test control_bench --no-run -q && flock /tmp/layercast-heavy.lock cargo test --release -p layercast-server --features research --test control_bench -- --ignored --test-threads 1 --nocapture && node scripts/acceptance.mjs

capacity: ## Players one machine carries, synthetic and video (docs/reliability.md)
	@scripts/setup.sh && npm run -w e2e cli -- capacity $(ARGS)

containers: ## Build the server and player images (podman, local Debian base) and run them
	@deploy/container/build-local.sh

test-audio: ## Audio and lip sync, full: 60-s A/V offset, 1 % loss, layer switches, natural clip (issue 21, ~5 min)
	@scripts/setup.sh && . scripts/features.sh && flock /tmp/layercast-heavy.lock cargo test --release --workspace $$LAYERCAST_FEATURES --test netns_audio -- --ignored --nocapture --test-threads 1 && node scripts/acceptance.mjs

acceptance: ## Regenerate docs/acceptance.md from the latest measurements
	@node scripts/acceptance.mjs

clean-net: ## Remove any network namespaces a crashed run left behind (and what ran in them)
	@for ns in $$(ip netns list | awk '/^lc-/{print $$1}'); do ip netns pids $$ns | xargs -r kill -9; ip netns del $$ns; done
	@rm -rf /tmp/lc-e[0-9]*-frr-*
