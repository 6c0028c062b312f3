"""Prints the greeting produced by the vendored greetlib package."""

import greetlib


def main() -> None:
    print(greetlib.greet())


if __name__ == "__main__":
    main()
