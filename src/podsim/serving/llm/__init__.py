"""LLM inference serving: step times of prefill and decode (:mod:`.steps`) and the
serving simulation of requests on replicas with continuous batching, a paged KV cache,
schedulers, routers and prefill/decode disaggregation."""
