import unittest

from mathlib import mean, median, variance


class StatsTest(unittest.TestCase):
    def test_mean(self):
        self.assertEqual(mean([1, 2, 3, 4]), 2.5)

    def test_mean_empty(self):
        with self.assertRaises(ValueError):
            mean([])

    def test_median_odd_and_even(self):
        self.assertEqual(median([3, 1, 2]), 2)
        self.assertEqual(median([4, 1, 3, 2]), 2.5)

    def test_variance(self):
        self.assertEqual(variance([2, 4, 4, 4, 5, 5, 7, 9]), 4.0)
        self.assertAlmostEqual(variance([1, 2, 3, 4], sample=True), 5 / 3)


if __name__ == "__main__":
    unittest.main()
