"""CEL: the parser, the compiler to Python, the value semantics, the function library, the environment expressions are checked and run in, and the reference engine behind them."""
