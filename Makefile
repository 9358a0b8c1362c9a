# muster: the user-facing targets. Everything real happens in CMake and CTest.
#   make deps       install the Debian packages (skips apt when all are present)
#   make build      configure and build into build/ (binaries in build/bin/)
#   make test       deps + build + every test (ctest)
#   make test-asan  deps + the non-LibTorch parts and their tests under ASan+UBSan (build-asan/)
#   make demo       deps + build + the embedded demo
#   make bench      deps + build + the benchmarks under bench/
#   make package    deps + build + the Debian packages (build/packages/*.deb)
#   make test-package  the packages installed on this machine, checked and purged (root);
#                   TEST_INSTALL_ARGS=--replace purges a muster installed before (CI)
BUILD      ?= build
BUILD_ASAN ?= build-asan
JOBS       ?= $(shell nproc)
CMAKE_ARGS ?=
# Ninja where it is installed (ninja-build, in the apt list): it starts each object as soon as its
# own inputs exist, where make's recursive targets wait for each other (a fresh build on the 2-core
# VM: 1073 s with Ninja, 1243 s with make). A build folder keeps the generator it was made with.
GENERATOR  ?= $(if $(shell command -v ninja),Ninja,Unix Makefiles)
generator   = $(if $(wildcard $(1)/CMakeCache.txt),,-G "$(GENERATOR)")

.PHONY: deps build test test-asan demo bench package test-package

deps:
	@packaging/install-deps.sh

build: deps
	cmake -S . -B $(BUILD) $(call generator,$(BUILD)) $(CMAKE_ARGS)
	cmake --build $(BUILD) -j $(JOBS)

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

test-asan: deps
	cmake -S . -B $(BUILD_ASAN) $(call generator,$(BUILD_ASAN)) -DMUSTER_SANITIZE=ON -DMUSTER_CUDA=OFF -DMUSTER_BUILD_BENCH=OFF -DMUSTER_GEMM=blas $(CMAKE_ARGS)
	cmake --build $(BUILD_ASAN) -j $(JOBS)
	cd $(BUILD_ASAN) && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --output-on-failure -j $(JOBS)

demo: build
	@etc/examples/demo.sh $(BUILD)/bin

bench: build
	@bench/run.sh $(BUILD)

package: build
	cmake --build $(BUILD) --target package

test-package: package
	packaging/test-install.sh $(TEST_INSTALL_ARGS) $(BUILD)/packages
