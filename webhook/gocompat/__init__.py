"""Go's behaviour where Kubernetes' answers depend on it, reproduced exactly.

The apiserver, cel-go and kube-openapi are written in Go: their error texts, their parsers'
edge cases and their printing of values come from Go's standard library. Each module here
emulates one Go package, named for it, with Go's exact results and error texts:

* ``fmt``: ``%v``/``%q`` of values and ``encoding/json``'s output, as the apiserver's messages print them;
* ``neturl``: ``net/url``'s ``ParseRequestURI`` and the ``URL`` getters (``uri`` format, CEL's url library);
* ``regexp``: RE2 patterns with ``regexp.Compile``'s error texts (schema ``pattern``, CEL's regex functions);
* ``strconv``: ``ParseInt``/``ParseUint``/``ParseFloat`` as cel-go converts strings to numbers;
* ``time``: ``ParseDuration``, ``Parse(RFC3339)`` and ``Format(RFC3339Nano)``.
"""
