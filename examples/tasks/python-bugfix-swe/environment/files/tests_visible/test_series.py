import unittest

from mathlib import cumulative_sum, differences, moving_average


class SeriesTest(unittest.TestCase):
    def test_cumulative_sum(self):
        self.assertEqual(cumulative_sum([1, 2, 3]), [1, 3, 6])

    def test_differences(self):
        self.assertEqual(differences([1, 4, 9, 16]), [3, 5, 7])

    def test_moving_average_first_window(self):
        self.assertEqual(moving_average([2, 4, 6, 8, 10], 3)[0], 4.0)

    def test_moving_average_rejects_bad_window(self):
        with self.assertRaises(ValueError):
            moving_average([1, 2, 3], 0)
        with self.assertRaises(ValueError):
            moving_average([1, 2, 3], 4)


if __name__ == "__main__":
    unittest.main()
