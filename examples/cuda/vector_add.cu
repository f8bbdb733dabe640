// Adds two vectors on the GPU and checks the result on the CPU.
// Build: nvcc -O2 -o vector_add vector_add.cu   (needs a -devel agent image)
// Exit code 0 only when the GPU computed the right answer.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <cuda_runtime.h>

#define CHECK(call)                                                               \
    do {                                                                          \
        cudaError_t err_ = (call);                                                \
        if (err_ != cudaSuccess) {                                                \
            std::fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__,    \
                         #call, cudaGetErrorString(err_));                        \
            std::exit(1);                                                         \
        }                                                                         \
    } while (0)

__global__ void add(const float *a, const float *b, float *c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}

int main() {
    int count = 0;
    CHECK(cudaGetDeviceCount(&count));
    if (count == 0) {
        std::fprintf(stderr, "no CUDA device visible (check --gpus / NVIDIA_VISIBLE_DEVICES)\n");
        return 1;
    }
    cudaDeviceProp prop{};
    CHECK(cudaGetDeviceProperties(&prop, 0));
    int driver = 0, runtime = 0;
    CHECK(cudaDriverGetVersion(&driver));
    CHECK(cudaRuntimeGetVersion(&runtime));
    std::printf("device 0: %s (compute %d.%d, %.0f MiB), driver CUDA %d.%d, runtime %d.%d\n",
                prop.name, prop.major, prop.minor, prop.totalGlobalMem / 1048576.0,
                driver / 1000, (driver % 1000) / 10, runtime / 1000, (runtime % 1000) / 10);

    const int n = 1 << 24;
    std::vector<float> a(n), b(n), c(n);
    for (int i = 0; i < n; ++i) {
        a[i] = std::sin(i) * std::sin(i);
        b[i] = std::cos(i) * std::cos(i);
    }
    float *da = nullptr, *db = nullptr, *dc = nullptr;
    const size_t bytes = n * sizeof(float);
    CHECK(cudaMalloc(&da, bytes));
    CHECK(cudaMalloc(&db, bytes));
    CHECK(cudaMalloc(&dc, bytes));
    CHECK(cudaMemcpy(da, a.data(), bytes, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(db, b.data(), bytes, cudaMemcpyHostToDevice));
    const int threads = 256;
    add<<<(n + threads - 1) / threads, threads>>>(da, db, dc, n);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpy(c.data(), dc, bytes, cudaMemcpyDeviceToHost));
    CHECK(cudaFree(da));
    CHECK(cudaFree(db));
    CHECK(cudaFree(dc));

    // sin^2 + cos^2 = 1 for every element.
    int wrong = 0;
    for (int i = 0; i < n; ++i)
        if (std::fabs(c[i] - 1.0f) > 1e-5f) ++wrong;
    if (wrong) {
        std::fprintf(stderr, "%d of %d results are wrong\n", wrong, n);
        return 1;
    }
    std::printf("vector_add: %d elements OK\n", n);
    return 0;
}
