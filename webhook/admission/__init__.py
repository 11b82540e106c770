"""The admission chain and its edge with the apiserver: AdmissionReview v1/v1beta1 in and out
(``review``), the chain that answers a review or runs a whole write offline in the apiserver's
order (``chain``), and the smallest JSON patch between two documents (``patch``)."""
