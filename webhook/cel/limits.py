"""The CEL limits, in one place: Kubernetes' cost budgets and sizes, and the engines' own bounds.

Kubernetes' values are those of kube-apiserver 1.36 (``k8s.io/apiserver/pkg/apis/cel/config.go``,
``apiextensions-apiserver/pkg/apiserver/schema/cel``); the engines' bounds are where an
evaluation stops whatever its cost says.
"""

# Kubernetes (celconfig)
PER_CALL_LIMIT = 1_000_000                    # PerCallLimit: the cost of one evaluation
RUNTIME_CEL_COST_BUDGET = 10_000_000          # RuntimeCELCostBudget: every rule of one request
RUNTIME_CEL_COST_BUDGET_MATCH_CONDITIONS = 2_500_000  # RuntimeCELCostBudgetMatchConditions: an object's matchConditions
STATIC_ESTIMATED_COST_LIMIT = 10_000_000      # a rule's estimated cost times its cardinality, at CRD creation
STATIC_ESTIMATED_CRD_COST_LIMIT = 100_000_000  # the sum of those over a CRD's schema
MAX_REQUEST_SIZE_BYTES = 3 * 1024 * 1024      # the largest request: how often a node can repeat in one
MAX_EVALUATED_MESSAGE_EXPRESSION_SIZE_BYTES = 5 * 1024  # a messageExpression's result, past which the message is used

# the engines' bounds
RANGE_LIMIT = PER_CALL_LIMIT    # the longest list ``lists.range(n)`` builds: past it the call costs more than allowed
ITERATION_BUDGET = 10_000       # cel-cpp's comprehension iterations per evaluation (the native path and
                                # cel-python stop there too, as cel-expr would)
