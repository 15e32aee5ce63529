"""XReg training: tf-idf features, relevance weights, label trees, node regressors."""
