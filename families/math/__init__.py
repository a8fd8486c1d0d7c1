"""The math family: final answers read out of model text and compared numerically or symbolically
(`math_answer`); GSM8K and MATH task files."""
