"""One module per operation: its flow, used by the sync request and by the chained step alike."""
