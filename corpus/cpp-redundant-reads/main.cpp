// Mistake: an analysis loop re-reads the same 16 MiB input file with an
// std::ifstream at every one of its 150 steps, although the file does not
// change: 150 x 16 MiB = 2.4 GiB read for 16 MiB of data.
// Fix: read the file once into a std::vector before the loop and use the
// vector at every step.  Both modes compute the same result.
// Usage: prog mistake|fixed   (creates input.bin, then reads it)
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <vector>

static const std::size_t N = 2 * 1024 * 1024; // 16 MiB of doubles
static const int STEPS = 150;

static std::vector<double> load(const char *path)
{
    std::vector<double> v(N);
    std::ifstream in(path, std::ios::binary);
    if (!in.read(reinterpret_cast<char *>(v.data()), N * sizeof(double))) {
        std::cerr << "cannot read " << path << "\n";
        std::exit(1);
    }
    return v;
}

int main(int argc, char **argv)
{
    if (argc != 2 || (std::strcmp(argv[1], "mistake") && std::strcmp(argv[1], "fixed"))) {
        std::cerr << "usage: " << argv[0] << " mistake|fixed\n";
        return 2;
    }
    bool mistake = !std::strcmp(argv[1], "mistake");
    {
        std::vector<double> v(N);
        for (std::size_t i = 0; i < N; i++)
            v[i] = std::sin(1e-3 * static_cast<double>(i));
        std::ofstream out("input.bin", std::ios::binary);
        out.write(reinterpret_cast<const char *>(v.data()), N * sizeof(double));
    }

    std::vector<double> data;
    if (!mistake)
        data = load("input.bin");
    double result = 0;
    for (int step = 0; step < STEPS; step++) {
        if (mistake)
            data = load("input.bin");
        // one step of the analysis: a weighted sum with a step-dependent weight
        double w = 1.0 + 0.01 * step, s = 0;
        for (std::size_t i = 0; i < N; i += 64)
            s += w * data[i];
        result += s;
    }
    std::cout << "result " << result << "\n";
    return 0;
}
