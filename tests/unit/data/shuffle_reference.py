#!/usr/bin/python3
"""An independent implementation of the input pipeline's per-epoch order
(core/data/pipeline.h: ShuffledOrder) and of the random-shuffle queue's
draws, written from their specification: MT19937-64 (Matsumoto and
Nishimura's reference algorithm), SplitMix64 seeding, rejection sampling
and Fisher-Yates. pipeline_test.cc and queue_test.cc hold its output.

    /usr/bin/python3 tests/unit/data/shuffle_reference.py
"""

MASK = (1 << 64) - 1


class MT19937_64:
    def __init__(self, seed):
        self.mt = [0] * 312
        self.mt[0] = seed & MASK
        for i in range(1, 312):
            prev = self.mt[i - 1]
            self.mt[i] = (6364136223846793005 * (prev ^ (prev >> 62)) + i) & MASK
        self.index = 312

    def twist(self):
        upper, lower = 0xFFFFFFFF80000000, 0x7FFFFFFF
        for i in range(312):
            x = (self.mt[i] & upper) | (self.mt[(i + 1) % 312] & lower)
            xa = x >> 1
            if x & 1:
                xa ^= 0xB5026F5AA96619E9
            self.mt[i] = self.mt[(i + 156) % 312] ^ xa
        self.index = 0

    def __call__(self):
        if self.index >= 312:
            self.twist()
        y = self.mt[self.index]
        self.index += 1
        y ^= (y >> 29) & 0x5555555555555555
        y ^= (y << 17) & 0x71D67FFFEDA60000
        y ^= (y << 37) & 0xFFF7EEE000000000
        y ^= y >> 43
        return y & MASK


def splitmix64(x):
    z = (x + 0x9E3779B97F4A7C15) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def mix_seed(seed, stream):
    return splitmix64(splitmix64(seed) ^ stream)


def uniform_below(gen, bound):
    excess = (1 << 64) % bound
    while True:
        draw = gen()
        if draw >= excess:
            return draw % bound


def shuffled_order(n, seed, epoch):
    order = list(range(n))
    gen = MT19937_64(mix_seed(seed, epoch))
    for i in range(n - 1, 0, -1):
        j = uniform_below(gen, i + 1)
        order[i], order[j] = order[j], order[i]
    return order


def shuffle_queue_order(n, seed, seed2):
    """Values 0..n-1 enqueued at once into a closed RandomShuffleQueue and
    dequeued one element at a time."""
    gen = MT19937_64(mix_seed(seed, seed2))
    elements = list(range(n))
    out = []
    while elements:
        k = uniform_below(gen, len(elements))
        elements[k], elements[-1] = elements[-1], elements[k]
        out.append(elements.pop())
    return out


if __name__ == "__main__":
    # The standard's check value: the 10000th output of a default-seeded
    # std::mt19937_64 is 9981545732273789042.
    g = MT19937_64(5489)
    for _ in range(9999):
        g()
    assert g() == 9981545732273789042
    print("ShuffledOrder(10, 42, 0) =", shuffled_order(10, 42, 0))
    print("ShuffledOrder(10, 42, 1) =", shuffled_order(10, 42, 1))
    print("ShuffledOrder(7, 0, 3) =", shuffled_order(7, 0, 3))
    print("ShuffledOrder(10, 7, 0) =", shuffled_order(10, 7, 0))
    print("ShuffledOrder(10, 7, 1) =", shuffled_order(10, 7, 1))
    print("shuffle queue (8, seed 5, seed2 0) =", shuffle_queue_order(8, 5, 0))
