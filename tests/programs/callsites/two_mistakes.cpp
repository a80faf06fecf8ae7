// Two I/O mistakes on known lines, for the call-site tests: each line marked
// "MISTAKE: <check> in <function>" is the call the finding of that check is
// about.
//   1. save_values() ends each of 20,000 values with std::endl, which flushes
//      the stream: one write() of ~10 bytes per value, made inside libstdc++
//      from std::endl's code inlined into save_values (<ostream>);
//   2. the unchanging 1 MiB input.bin is read whole again, from the same
//      ifstream, at each of 40 steps.
// Usage: prog   (writes values.txt and input.bin in the current directory)
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <vector>

static const int VALUES = 20000;
static const int STEPS = 40;
static const std::size_t N = 128 * 1024; // 1 MiB of doubles

__attribute__((noinline)) static void save_values(std::ofstream &out)
{
    for (int i = 0; i < VALUES; i++)
        out << 1e-3 * i << std::endl; // MISTAKE: posix-small-writes in save_values
}

int main()
{
    {
        std::ofstream out("values.txt");
        save_values(out);
    }
    {
        std::vector<double> v(N, 1.5);
        std::ofstream out("input.bin", std::ios::binary);
        out.write(reinterpret_cast<const char *>(v.data()), N * sizeof(double));
    }
    double sum = 0;
    std::vector<double> v(N);
    std::ifstream in("input.bin", std::ios::binary);
    for (int s = 0; s < STEPS; s++) {
        in.seekg(0);
        in.read(reinterpret_cast<char *>(v.data()), N * sizeof(double)); // MISTAKE: posix-redundant-reads in main
        if (!in) {
            std::cerr << "cannot read input.bin\n";
            return 1;
        }
        sum += v[s];
    }
    std::cout << "sum " << sum << "\n";
    return 0;
}
