"""The CEL evaluator the tests build for themselves (the default engine, every route), as the
command line and the server build theirs at their edge."""

from webhook.cel import Evaluator

EVALUATOR = Evaluator()
