# gcx: C/CUDA training with built-in distributed gradient compression.
#
#   make              build the CPU library and binaries (./train_resnet, ./gcx, ...)
#   make test         build and run every test that needs no GPU; ends "N passed, N failed"
#   make test-cuda    CUDA parity tests (needs a GPU)
#   make test-emu     the CUDA parity tests on the host emulation of the GPU (no GPU needed;
#                     part of make test)
#   make lib          build/lib/libgcx.so: the codecs as a shared library, one header (lib/gcx.h)
#   make install      PREFIX=/usr/local: libgcx.so, gcx.h and gcx.pc (pkg-config)
#   make fuzz         libFuzzer + sanitizers on every decoder (FUZZ_SECONDS per target)
#   make bench        benchmarks (see bench/)
#   make deps         install the Debian packages the project needs (scripts/deps.sh)
#   make clean
#
# Switches: NO_OPENMP=1 NO_MPI=1 NO_CUDA=1 NO_NCCL=1 NO_CUDNN=1 NO_EMU=1 DEBUG=1
# DATA_DIR (default data/) is passed to tests and exported to binaries run by make.

CC      ?= gcc
NVCC    ?= nvcc
DATA_DIR ?= data
export DATA_DIR

BUILD   := build
CFLAGS_BASE := -std=c11 -Wall -Wextra -D_GNU_SOURCE -fno-math-errno -I. -MMD -MP
ifdef DEBUG
OPT := -O0 -g
else
OPT := -O3 -march=native -g
endif
CFLAGS  ?=
CFLAGS  += $(CFLAGS_BASE) $(OPT)
LDLIBS  := -lz -lm -lpthread

# ---------------------------------------------------------------- probes ----
FOUND :=

# OpenMP
ifeq ($(NO_OPENMP),)
  HAVE_OPENMP := $(shell echo 'int main(void){return 0;}' | $(CC) -fopenmp -x c - -o /dev/null 2>/dev/null && echo 1)
endif
ifeq ($(HAVE_OPENMP),1)
  CFLAGS += -fopenmp -DHAVE_OPENMP
  LDFLAGS += -fopenmp
  FOUND += openmp
endif

# OpenBLAS (CBLAS); prefer the OpenMP build so BLAS threads and ours are one pool
OPENBLAS_OMP_DIR := /usr/lib/x86_64-linux-gnu/openblas-openmp
ifneq ($(wildcard $(OPENBLAS_OMP_DIR)/libopenblas.so),)
  BLAS_LIBS := -L$(OPENBLAS_OMP_DIR) -Wl,-rpath,$(OPENBLAS_OMP_DIR) -lopenblas
  FOUND += openblas-openmp
else
  BLAS_LIBS := -lopenblas
  FOUND += openblas
endif
CBLAS_INC := $(firstword $(wildcard /usr/include/x86_64-linux-gnu/openblas-openmp /usr/include/x86_64-linux-gnu/openblas-pthread /usr/include/openblas))
ifneq ($(CBLAS_INC),)
  CFLAGS += -I$(CBLAS_INC)
endif
LDLIBS := $(BLAS_LIBS) $(LDLIBS)

# MPI
ifeq ($(NO_MPI),)
  MPI_CFLAGS := $(shell mpicc --showme:compile 2>/dev/null)
  MPI_LIBS   := $(shell mpicc --showme:link 2>/dev/null)
endif
ifneq ($(MPI_LIBS),)
  CFLAGS += $(MPI_CFLAGS) -DHAVE_MPI
  LDLIBS += $(MPI_LIBS)
  FOUND += mpi
  HAVE_MPI := 1
endif

# CUDA, cuDNN, cuBLAS, NCCL
CUDA_HOME ?= /usr/local/cuda
ifeq ($(NO_CUDA),)
  HAVE_NVCC := $(shell command -v $(NVCC) >/dev/null 2>&1 && echo 1)
endif
ifeq ($(HAVE_NVCC),1)
  FOUND += cuda
  ifeq ($(NO_CUDNN),)
    ifneq ($(wildcard $(CUDA_HOME)/include/cudnn.h),)
      HAVE_CUDNN := 1
      FOUND += cudnn
    endif
  endif
  ifeq ($(NO_NCCL),)
    ifneq ($(wildcard $(CUDA_HOME)/include/nccl.h /usr/include/nccl.h),)
      HAVE_NCCL := 1
      FOUND += nccl
    endif
  endif
endif

# CUDA build: every .cu under the library folders joins the library; CUDA C
# (kernels + extern "C" host wrappers keeping the CPU signatures)
ifeq ($(HAVE_NVCC),1)
  CUDA_ARCH ?= -gencode=arch=compute_90,code=[sm_90,compute_90]
  # every host thread (a local worker) its own default stream, so workers sharing a GPU
  # run at once; stream 0 in our calls is that stream (docs/GPU.md, Streams)
  NVCC_FLAGS := -O3 -std=c++17 $(CUDA_ARCH) -I. -DHAVE_CUDA -Xcompiler -fPIC,-Wall -MMD -MP \
                -Xptxas -warn-spills,-warn-lmem-usage --default-stream per-thread
  CFLAGS += -DHAVE_CUDA -I$(CUDA_HOME)/include -DCUDA_API_PER_THREAD_DEFAULT_STREAM
  CUDA_LIBS := -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudart -lcublas
  ifeq ($(HAVE_CUDNN),1)
    NVCC_FLAGS += -DHAVE_CUDNN
    CFLAGS += -DHAVE_CUDNN
    CUDA_LIBS += -lcudnn
  endif
  ifeq ($(HAVE_NCCL),1)
    NVCC_FLAGS += -DHAVE_NCCL
    CFLAGS += -DHAVE_NCCL
    CUDA_LIBS += -lnccl
  endif
  CUDA_LIBS += -lstdc++
  LDLIBS += $(CUDA_LIBS)
endif

# --------------------------------------------------------------- sources ----
BIN_NAMES := train_resnet train_lstm train_lenet gcx
LIB_DIRS  := common nn optim compress datasets dist
LIB_SRCS  := $(foreach d,$(LIB_DIRS),$(wildcard $(d)/*.c)) \
             $(filter-out $(addprefix examples/,$(addsuffix .c,$(BIN_NAMES))),$(wildcard examples/*.c)) \
             lib/gcx.c
LIB_OBJS  := $(patsubst %.c,$(BUILD)/%.o,$(LIB_SRCS))
ifeq ($(HAVE_NVCC),1)
  CUDA_SRCS := $(foreach d,$(LIB_DIRS),$(wildcard $(d)/*.cu))
  LIB_OBJS  += $(patsubst %.cu,$(BUILD)/%.cu.o,$(CUDA_SRCS))
endif
LIB       := $(BUILD)/libgcx.a

BINS      := $(notdir $(basename $(wildcard $(addprefix examples/,$(addsuffix .c,$(BIN_NAMES))))))
# where the binaries go: the repository root, or BIN_DIR (ending in /) for a second build
# beside the first (scripts/gpu_bundle.sh: BUILD=build/gpu BIN_DIR=build/gpu/bin/)
BIN_DIR   ?=
BIN_PATHS := $(addprefix $(BIN_DIR),$(BINS))

TEST_SRCS := $(wildcard tests/test_*.c)
TEST_BINS := $(patsubst tests/%.c,$(BUILD)/tests/%,$(TEST_SRCS))
# shell tests of the built binaries' command lines
TEST_SCRIPTS := $(wildcard tests/test_*.sh)
# helpers the shell tests run (tests/tool_*.c): test_torch_interop.sh's logits
TEST_TOOLS := $(patsubst tests/%.c,$(BUILD)/tests/%,$(wildcard tests/tool_*.c))

FUZZ_SRCS := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_REPLAY := $(patsubst tests/fuzz/%.c,$(BUILD)/fuzz/%_replay,$(FUZZ_SRCS))

# every test and fuzz replay also runs under AddressSanitizer + UBSan, against a
# NO_CUDA build of the whole library at -O1 in $(BUILD)/sanitize (a make of its
# own; with MPI where found, so test_dist_mpi's MPI processes run under it too,
# Open MPI's own leaks suppressed by tests/lsan_mpi.h); not test_data_folder (the
# stb_image_write.h it writes its test images with shifts into the sign bit; the
# image decoder the library uses is covered by fuzz_image)
ASAN_FLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
SAN_DIR := $(BUILD)/sanitize
ASAN_BINS := $(patsubst $(BUILD)/%,$(SAN_DIR)/%,$(filter-out %/test_data_folder,$(TEST_BINS)) \
               $(FUZZ_REPLAY))

# ---------------------------------------------------------------- rules ----
.PHONY: all lib install test build-tests test-net test-cuda build-cuda-tests test-emu build-emu fuzz bench deps data clean probe fixtures
all: probe $(BIN_PATHS)

probe:
	@echo "gcx build: found [$(strip $(FOUND))]  (switches: NO_OPENMP NO_MPI NO_CUDA NO_CUDNN NO_NCCL)"

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/%.cu.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCC_FLAGS) -c $< -o $@

# the version the trainers write into the first record of their logs: git describe of the
# tree when built from git; the header changes only when the version does
GCX_VERSION := $(shell git describe --always --dirty 2>/dev/null || echo unknown)
$(BUILD)/gcx_version.h: FORCE
	@mkdir -p $(BUILD); v='#define GCX_VERSION "$(GCX_VERSION)"'; \
	  [ "$$(cat $@ 2>/dev/null)" = "$$v" ] || echo "$$v" >$@
FORCE:
.PHONY: FORCE
$(BUILD)/examples/train_log.o: $(BUILD)/gcx_version.h
$(BUILD)/examples/train_log.o: CFLAGS += -I$(BUILD)
$(BUILD)/lib/gcx.o: $(BUILD)/gcx_version.h
$(BUILD)/lib/gcx.o: CFLAGS += -I$(BUILD)

$(LIB): $(LIB_OBJS)
	@rm -f $@.tmp.$$$$ && ar rcs $@.tmp.$$$$ $^ && mv -f $@.tmp.$$$$ $@

$(BIN_PATHS): $(BIN_DIR)%: examples/%.c $(LIB)
	@mkdir -p $(@D) $(BUILD)/bin
	$(CC) $(CFLAGS) -MF $(BUILD)/bin/$*.d $< $(LIB) $(LDFLAGS) $(LDLIBS) -o $@

$(BUILD)/tests/%: tests/%.c $(LIB) tests/test.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $< $(LIB) $(LDFLAGS) $(LDLIBS) -o $@

$(BUILD)/fuzz/%_replay: tests/fuzz/%.c tests/fuzz/replay_main.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DCORPUS_DIR='"tests/fuzz/corpus/$*"' $< tests/fuzz/replay_main.c $(LIB) $(LDFLAGS) $(LDLIBS) -o $@

.PHONY: sanitize-build
$(ASAN_BINS): sanitize-build ;
# (CFLAGS and LDFLAGS from the environment would reach it with this build's
# additions in them: the probes' -DHAVE_MPI, -DHAVE_CUDA and include paths)
sanitize-build:
	@env -u CFLAGS -u LDFLAGS $(MAKE) -s --no-print-directory NO_CUDA=1 BUILD=$(SAN_DIR) \
	  OPT="-O1 -g $(ASAN_FLAGS)" $(or $(filter $(ASAN_BINS),$(MAKECMDGOALS)),$(ASAN_BINS))

# libgcx.so (make lib): the codecs of compress/ behind one public C header, lib/gcx.h
# (lib/gcx.c). Its own -fPIC objects in $(BUILD)/pic, so the static build is
# unaffected; CPU only (no CUDA, no MPI, no BLAS), with the same OPT as the
# binaries, so its frames are the bytes ./gcx writes. Only the gcx_* functions
# are exported (-fvisibility=hidden, GCX_API in lib/gcx.h).
PREFIX    ?= /usr/local
SO_MAJOR  := 1
SO_NAME   := libgcx.so.$(SO_MAJOR)
SO_DIR    := $(BUILD)/lib
SO        := $(SO_DIR)/$(SO_NAME)
SO_SRCS   := lib/gcx.c $(wildcard compress/*.c) common/crc32c.c common/errors.c common/rng.c
SO_OBJS   := $(patsubst %.c,$(BUILD)/pic/%.o,$(SO_SRCS))
SO_CFLAGS := $(CFLAGS_BASE) $(OPT) $(if $(filter 1,$(HAVE_OPENMP)),-fopenmp -DHAVE_OPENMP) -fPIC -fvisibility=hidden \
             -I$(BUILD)
lib: $(SO_DIR)/libgcx.so

$(BUILD)/pic/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(SO_CFLAGS) -c $< -o $@
$(BUILD)/pic/lib/gcx.o: $(BUILD)/gcx_version.h

$(SO): $(SO_OBJS)
	@mkdir -p $(dir $@)
	$(CC) -shared -Wl,-soname,$(SO_NAME) -Wl,--no-undefined $^ $(if $(filter 1,$(HAVE_OPENMP)),-fopenmp) -lm -o $@
$(SO_DIR)/libgcx.so: $(SO)
	ln -sf $(SO_NAME) $@

# make install PREFIX=DIR [DESTDIR=...]: DIR/lib/libgcx.so.1 (+ the libgcx.so link),
# DIR/include/gcx.h, DIR/lib/pkgconfig/gcx.pc
install: lib
	install -d $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/include
	install -m 755 $(SO) $(DESTDIR)$(PREFIX)/lib/$(SO_NAME)
	ln -sf $(SO_NAME) $(DESTDIR)$(PREFIX)/lib/libgcx.so
	install -m 644 lib/gcx.h $(DESTDIR)$(PREFIX)/include/gcx.h
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(SO_MAJOR)|' lib/gcx.pc.in >$(DESTDIR)$(PREFIX)/lib/pkgconfig/gcx.pc

# CUDA parity tests (tests/cuda/test_*.c): every CUDA op, optimizer and codec
# kernel against its CPU twin; needs a GPU to run, builds wherever nvcc is
CUDA_TEST_SRCS := $(wildcard tests/cuda/test_*.c)
CUDA_TEST_BINS := $(patsubst tests/cuda/%.c,$(BUILD)/tests/cuda/%,$(CUDA_TEST_SRCS))
$(BUILD)/tests/cuda/%: tests/cuda/%.c $(LIB) tests/test.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $< $(LIB) $(LDFLAGS) $(LDLIBS) -o $@

test-cuda: all $(CUDA_TEST_BINS)
ifneq ($(HAVE_NVCC),1)
	@echo "test-cuda: nvcc not found; nothing to run" && exit 1
endif
	@TEST_JOBS=$${TEST_JOBS:-1} tests/run.sh $(CUDA_TEST_BINS)

build-cuda-tests: $(CUDA_TEST_BINS)

# Host emulation of the CUDA code (tests/emulation/README.md): the CUDA parity tests
# built with g++ against the real kernels (each block's threads run as fibers) and the
# real GPU host code, cuBLAS, cuDNN and NCCL replaced by checked reference code, on a
# NO_CUDA build of the library; no GPU needed. make test runs them unless NO_EMU=1,
# under AddressSanitizer, with the blocks and threads in a shuffled order (EMU_ORDER)
# and the codec test's sizes up to 8193 values; then the trainers with --device cuda
# (and --backend nccl) against --device cpu (test_trainers_emu.sh), and every phase of
# scripts/gpu_check.sh at toy sizes on the emulated binaries (gpu_check_dry.sh).
EMU_DIR := $(BUILD)/emu
EMU_TEST_BINS := $(addprefix $(EMU_DIR)/codec/,test_emu_sched test_emu_async test_codec_emu test_optim_emu fuzz_gcomp_state_emu fuzz_frame_emu \
                                              fuzz_gcomp_emu) \
                 $(addprefix $(EMU_DIR)/nn/,test_nn_cuda_ops_emu test_nn_cuda_lenet_emu test_lstm_lm_emu \
                                            test_resnet_cuda_emu test_exchange_cuda_emu)
ifeq ($(HAVE_MPI),1)
  EMU_TEST_BINS += $(EMU_DIR)/codec/test_comm_nccl_emu
endif
EMU_TEST_BINS += tests/emulation/test_trainers_emu.sh tests/emulation/gpu_check_dry.sh
EMU_DEPS := $(shell find tests/emulation tests/cuda $(LIB_DIRS) examples bench -type f \
              \( -name '*.[ch]' -o -name '*.cu' -o -name '*.cpp' -o -name '*.cuh' -o -name '*.py' -o -name '*.sh' \))
EMU_ENV := EMU_ORDER=$${EMU_ORDER:-shuffle:1} GCX_CODEC_CUDA_BIG=0 GCX_CODEC_CUDA_MAXN=$${GCX_CODEC_CUDA_MAXN:-8193}
$(EMU_DIR)/codec/built: $(EMU_DEPS)
	@mkdir -p $(dir $@)
	EMU_ASAN=1 sh tests/emulation/build.sh $(dir $@) && touch $@
$(EMU_DIR)/nn/built: $(EMU_DEPS)
	@mkdir -p $(dir $@)
	EMU_ASAN=1 sh tests/emulation/nn/build.sh $(dir $@) && touch $@
EMU_BUILT := $(EMU_DIR)/codec/built $(EMU_DIR)/nn/built
ifneq ($(NO_EMU),)
  EMU_BUILT :=
  EMU_TEST_BINS :=
endif
build-emu: $(EMU_BUILT)
test-emu: $(EMU_BUILT)
	@$(EMU_ENV) tests/run.sh $(EMU_TEST_BINS)

# tests/run.sh runs TEST_JOBS tests at once (default: the number of cores); these run
# alone: a stall must be caught within a short --timeout that a neighbour could
# stretch, mpirun's ranks poll busily, and test_lib.sh's make install may relink the
# library that other tests load
TEST_ALONE := $(foreach d,$(BUILD) $(SAN_DIR),$(d)/tests/test_dist_comm $(d)/tests/test_dist_mpi) \
              tests/test_stall_mpi.sh tests/test_lib.sh
# test_net.sh mostly waits on its 20 Mbit/s links: it runs beside the others without
# taking a core's place (tests/run.sh TEST_LIGHT)
TEST_LIGHT := tests/test_net.sh
# The order they start in: those that run alone first (a test that runs alone waits
# for every test before it to end, which leaves a core idle behind a long one), the
# light one, then the longest (measured with TEST_TIMES), longest first, so that the
# short ones fill both cores to the end, then the rest as listed.
TEST_ALL := $(TEST_BINS) $(TEST_SCRIPTS) $(FUZZ_REPLAY) $(ASAN_BINS) $(EMU_TEST_BINS)
TEST_LONG := tests/emulation/test_trainers_emu.sh tests/emulation/gpu_check_dry.sh \
             $(EMU_DIR)/codec/test_codec_emu $(SAN_DIR)/tests/test_train_resume_corrupt tests/test_soak.sh \
             $(EMU_DIR)/nn/test_resnet_cuda_emu tests/test_trainer_cli.sh tests/test_ddp_hook.sh \
             $(BUILD)/tests/test_train_resume_corrupt $(EMU_DIR)/nn/test_exchange_cuda_emu \
             $(SAN_DIR)/tests/test_train_reshard
TEST_FIRST := $(foreach t,$(TEST_ALONE) $(TEST_LIGHT) $(TEST_LONG),$(filter $(t),$(TEST_ALL)))
# make test builds what the tests need on every core (TEST_BUILD_JOBS, default: the
# number of cores) unless make was given its own -j
TEST_BUILD_JOBS ?= $(shell nproc 2>/dev/null || echo 1)
build-tests: all lib $(TEST_BINS) $(TEST_TOOLS) $(FUZZ_REPLAY) $(ASAN_BINS) $(EMU_BUILT)
test:
	@$(MAKE) --no-print-directory $(if $(findstring -j,$(MAKEFLAGS)),,-j$(TEST_BUILD_JOBS)) build-tests
	@ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 $(EMU_ENV) TEST_ALONE="$(TEST_ALONE)" \
	  TEST_LIGHT="$(TEST_LIGHT)" tests/run.sh $(TEST_FIRST) $(filter-out $(TEST_FIRST),$(TEST_ALL))

# libFuzzer with ASan + UBSan, one binary per target, FUZZ_SECONDS each
ASAN_LIB_SRCS := $(wildcard common/*.c compress/*.c datasets/*.c) dist/bundle.c dist/comm_local.c
FUZZ_SECONDS ?= 60
FUZZ_CC ?= clang
fuzz:
	@mkdir -p $(BUILD)/libfuzzer
	@for f in $(FUZZ_SRCS); do \
	  n=$$(basename $$f .c); \
	  $(FUZZ_CC) -std=c11 -D_GNU_SOURCE -I. -g -O1 -fsanitize=fuzzer,address,undefined $$f $(ASAN_LIB_SRCS) -lm -lz -lpthread -o $(BUILD)/libfuzzer/$$n || exit 1; \
	  mkdir -p $(BUILD)/libfuzzer/corpus-$$n; \
	  echo "== $$n ($(FUZZ_SECONDS)s)"; \
	  $(BUILD)/libfuzzer/$$n -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 $(BUILD)/libfuzzer/corpus-$$n tests/fuzz/corpus/$$n || exit 1; \
	done

# regenerate the PyTorch reference fixtures (needs python3-torch: scripts/deps.sh --torch)
fixtures:
	@for f in tests/ref/*_fixtures.py; do echo "== $$f"; /usr/bin/python3 $$f || exit 1; done

# benchmarks: every bench/*.c becomes build/bench/<name>; scripts in bench/ run them
BENCH_SRCS := $(wildcard bench/*.c)
BENCH_BINS := $(patsubst bench/%.c,$(BUILD)/bench/%,$(BENCH_SRCS))
$(BUILD)/bench/%: bench/%.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $< $(LIB) $(LDFLAGS) $(LDLIBS) -o $@

bench: all $(BENCH_BINS)
	@echo "benchmarks built in $(BUILD)/bench; see bench/README.md for how to run them"

deps:
	scripts/deps.sh --plots --torch

# the multi-host lab alone: ranks in network namespaces on shaped links (root; part of make test)
test-net: all
	@tests/run.sh tests/test_net.sh

# the datasets into DATA_DIR, checked against their published checksums
data:
	scripts/get_data.sh $(DATA_DIR)

clean:
	rm -rf $(BUILD) $(BIN_PATHS) $(addsuffix .d,$(BIN_PATHS))

.SECONDARY:

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
