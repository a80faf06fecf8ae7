// Mistake: 500,000 values are written to a text file with
// `out << value << std::endl`.  std::endl writes a newline AND flushes the
// stream, so every value becomes its own write() system call of ~20 bytes.
// Fix: write '\n' instead of std::endl and let the stream buffer the
// output (it flushes when its buffer is full and at close).
// The file written is the same in both modes.
// Usage: prog mistake|fixed   (writes values.txt)
#include <cmath>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <iostream>

static const int N = 500000;

int main(int argc, char **argv)
{
    if (argc != 2 || (std::strcmp(argv[1], "mistake") && std::strcmp(argv[1], "fixed"))) {
        std::cerr << "usage: " << argv[0] << " mistake|fixed\n";
        return 2;
    }
    bool mistake = !std::strcmp(argv[1], "mistake");
    std::ofstream out("values.txt");
    out << std::setprecision(10);
    for (int i = 0; i < N; i++) {
        double value = std::exp(-1e-5 * i);
        if (mistake)
            out << value << std::endl;
        else
            out << value << '\n';
    }
    out.close();
    std::cout << "wrote " << N << " values\n";
    return 0;
}
