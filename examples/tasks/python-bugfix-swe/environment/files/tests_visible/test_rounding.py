import unittest

from mathlib import clamp, round_half_up


class RoundingTest(unittest.TestCase):
    def test_round_half_up(self):
        self.assertEqual(round_half_up(2.5), 3.0)
        self.assertEqual(round_half_up(2.675, 2), 2.68)

    def test_clamp(self):
        self.assertEqual(clamp(5, 0, 3), 3)
        self.assertEqual(clamp(-1, 0, 3), 0)


if __name__ == "__main__":
    unittest.main()
