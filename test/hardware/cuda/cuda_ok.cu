// The hardware tier's CUDA check: device count, the first device's properties, a vector-add
// kernel with its result verified, then "CUDA OK <device name>" on stdout.
//
// Exit codes: 0 all good; 2 a CUDA call failed (its name and CUDA's error on stderr, e.g.
// cudaErrorInsufficientDriver when libcuda.so.1 is missing); 3 the kernel computed wrong sums;
// 4 bad arguments. Built with `nvcc -cudart static`, so the only CUDA library it opens at run
// time is the driver's libcuda.so.1.
//
// Usage: cuda_ok [HOLD_SECONDS]
//   HOLD_SECONDS keeps the CUDA context (and its memory) alive that long after the check, so
//   that NVML lists the process while it runs (to trace it back to its container's cgroup).
#include <cstdio>
#include <cstdlib>
#include <unistd.h>
#include <cuda_runtime.h>

#define CHECK(call)                                                                       \
    do {                                                                                  \
        cudaError_t err_ = (call);                                                        \
        if (err_ != cudaSuccess) {                                                        \
            std::fprintf(stderr, "%s failed: %s (%s)\n", #call, cudaGetErrorName(err_),   \
                         cudaGetErrorString(err_));                                       \
            return 2;                                                                     \
        }                                                                                 \
    } while (0)

__global__ void vector_add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}

int main(int argc, char** argv) {
    long hold = 0;
    if (argc > 2 || (argc == 2 && (hold = std::strtol(argv[1], nullptr, 10)) < 0)) {
        std::fprintf(stderr, "usage: %s [HOLD_SECONDS]\n", argv[0]);
        return 4;
    }
    int count = 0;
    CHECK(cudaGetDeviceCount(&count));
    std::printf("devices %d\n", count);
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    std::printf("device 0: %s, compute capability %d.%d, %d multiprocessors, %zu MiB\n", prop.name,
                prop.major, prop.minor, prop.multiProcessorCount, prop.totalGlobalMem >> 20);

    const int n = 1 << 20;
    const size_t bytes = n * sizeof(float);
    float* host_a = static_cast<float*>(std::malloc(bytes));
    float* host_b = static_cast<float*>(std::malloc(bytes));
    float* host_c = static_cast<float*>(std::malloc(bytes));
    for (int i = 0; i < n; ++i) {
        host_a[i] = static_cast<float>(i);
        host_b[i] = 2.0f * static_cast<float>(i);
    }
    float *a = nullptr, *b = nullptr, *c = nullptr;
    CHECK(cudaMalloc(&a, bytes));
    CHECK(cudaMalloc(&b, bytes));
    CHECK(cudaMalloc(&c, bytes));
    CHECK(cudaMemcpy(a, host_a, bytes, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(b, host_b, bytes, cudaMemcpyHostToDevice));
    vector_add<<<(n + 255) / 256, 256>>>(a, b, c, n);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpy(host_c, c, bytes, cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; ++i) {
        if (host_c[i] != 3.0f * static_cast<float>(i)) {
            std::fprintf(stderr, "vector-add wrong at %d: %f, expected %f\n", i, host_c[i],
                         3.0f * static_cast<float>(i));
            return 3;
        }
    }
    std::printf("vector-add of %d elements correct\n", n);
    std::printf("CUDA OK %s\n", prop.name);
    std::fflush(stdout);
    if (hold > 0) sleep(static_cast<unsigned>(hold));
    CHECK(cudaFree(a));
    CHECK(cudaFree(b));
    CHECK(cudaFree(c));
    std::free(host_a);
    std::free(host_b);
    std::free(host_c);
    return 0;
}
