#include "tests/support/fashion_mnist.h"

#include <filesystem>

namespace weft::testing {

bool FashionMnistPresent() { return std::filesystem::exists(kFashionMnist + "train-images-idx3-ubyte.gz"); }

std::string FashionMnistFiles() {
  return "train_images = \"" + kFashionMnist + "train-images-idx3-ubyte.gz\"\n" + "train_labels = \"" + kFashionMnist +
         "train-labels-idx1-ubyte.gz\"\n" + "test_images = \"" + kFashionMnist + "t10k-images-idx3-ubyte.gz\"\n" +
         "test_labels = \"" + kFashionMnist + "t10k-labels-idx1-ubyte.gz\"\n";
}

}  // namespace weft::testing
