// Fashion-MNIST as the Debian package dataset-fashion-mnist installs it,
// for the tests that train the sample MLP on real data (they skip when the
// package is not installed).
#ifndef WEFT_TESTS_SUPPORT_FASHION_MNIST_H_
#define WEFT_TESTS_SUPPORT_FASHION_MNIST_H_

#include <string>

namespace weft::testing {

// The folder of the IDX files, with its trailing slash.
inline const std::string kFashionMnist = "/usr/share/datasets/fashion-mnist/";

// Whether the dataset is installed.
bool FashionMnistPresent();

// The [data] keys that name its four files (train_images, train_labels,
// test_images, test_labels), one a line, each ending in a newline.
std::string FashionMnistFiles();

}  // namespace weft::testing

#endif  // WEFT_TESTS_SUPPORT_FASHION_MNIST_H_
