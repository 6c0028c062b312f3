"""Hidden tests for python-bugfix-swe.

FailToPass: MovingAverageFixTest (fails on the shipped bug, passes once fixed).
PassToPass: everything else (passes before and after a correct fix).
"""

import unittest

import mathlib
from mathlib import (clamp, cumulative_sum, differences, mean, median, moving_average, round_half_up,
                     variance)


class MovingAverageFixTest(unittest.TestCase):
    def test_reported_example(self):
        self.assertEqual(moving_average([1, 2, 3, 4], 2), [1.5, 2.5, 3.5])

    def test_window_equal_to_length(self):
        self.assertEqual(moving_average([2, 4, 6], 3), [4.0])

    def test_window_one_returns_values(self):
        self.assertEqual(moving_average([5, -1, 3.5, 0], 1), [5.0, -1.0, 3.5, 0.0])

    def test_number_of_windows(self):
        for n in range(1, 12):
            for w in range(1, n + 1):
                self.assertEqual(len(moving_average(range(n), w)), n - w + 1, (n, w))

    def test_values_of_every_window(self):
        values = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5]
        for w in range(1, len(values) + 1):
            want = [sum(values[i:i + w]) / w for i in range(len(values) - w + 1)]
            got = moving_average(values, w)
            self.assertEqual(len(got), len(want), w)
            for g, e in zip(got, want):
                self.assertAlmostEqual(g, e, places=9)

    def test_last_window(self):
        self.assertAlmostEqual(moving_average([10, 20, 30, 40, 50], 3)[-1], 40.0)


class MovingAveragePassToPassTest(unittest.TestCase):
    def test_first_window(self):
        self.assertEqual(moving_average([2, 4, 6, 8, 10], 3)[0], 4.0)

    def test_rejects_bad_window(self):
        for w in (0, -1, 4, 100):
            with self.assertRaises(ValueError, msg=w):
                moving_average([1, 2, 3], w)

    def test_empty_input_rejected(self):
        with self.assertRaises(ValueError):
            moving_average([], 1)

    def test_accepts_any_iterable_and_does_not_mutate(self):
        data = [1, 2, 3, 4, 5, 6]
        moving_average(data, 2)
        self.assertEqual(data, [1, 2, 3, 4, 5, 6])
        self.assertEqual(moving_average((x for x in [4, 4, 4, 4]), 2)[0], 4.0)

    def test_returns_floats(self):
        self.assertTrue(all(isinstance(v, float) for v in moving_average([1, 2, 3, 4], 2)))


class OtherBehaviourTest(unittest.TestCase):
    def test_mean_median(self):
        self.assertEqual(mean([1, 2, 3, 4]), 2.5)
        self.assertEqual(median([5, 1, 3]), 3)
        self.assertEqual(median([4, 1, 3, 2]), 2.5)
        with self.assertRaises(ValueError):
            median([])
        with self.assertRaises(ValueError):
            mean([])

    def test_variance(self):
        self.assertEqual(variance([2, 4, 4, 4, 5, 5, 7, 9]), 4.0)
        self.assertAlmostEqual(variance([1, 2, 3, 4], sample=True), 5 / 3)
        with self.assertRaises(ValueError):
            variance([1], sample=True)

    def test_series(self):
        self.assertEqual(cumulative_sum([1, 2, 3, 4]), [1, 3, 6, 10])
        self.assertEqual(cumulative_sum([]), [])
        self.assertEqual(differences([1, 4, 9, 16]), [3, 5, 7])
        self.assertEqual(differences([7]), [])

    def test_rounding(self):
        self.assertEqual(round_half_up(2.5), 3.0)
        self.assertEqual(round_half_up(-2.5), -3.0)
        self.assertEqual(round_half_up(2.675, 2), 2.68)
        self.assertEqual(round_half_up(1.2345, 3), 1.235)
        self.assertEqual(round_half_up(0.4), 0.0)

    def test_clamp(self):
        self.assertEqual(clamp(5, 0, 3), 3)
        self.assertEqual(clamp(-1, 0, 3), 0)
        self.assertEqual(clamp(2, 0, 3), 2)
        with self.assertRaises(ValueError):
            clamp(1, 3, 0)

    def test_public_api(self):
        for name in ("clamp", "cumulative_sum", "differences", "mean", "median", "moving_average",
                     "round_half_up", "variance"):
            self.assertTrue(callable(getattr(mathlib, name)), name)


if __name__ == "__main__":
    unittest.main()
