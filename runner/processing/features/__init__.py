"""Feature types: how each one is fitted on the training split and transformed.

`base` holds the contract every type follows (fitting is a map-reduce over partitions, then
one `transform` per partition, whatever the processor); each type lives in a module of its own
(`number`, `category`, `binary`, `text`, `sets`, `date`, `vector`), `registry` names them, and
`feature_set` validates, fits and applies the configured features together. An output type's
model side (loss, metrics, decoding) is its head in `heads/`. A new type is a module plus one
line in `registry` (and one in `heads` where it can be an output).

Nothing is imported here: a scorer or a training worker imports `heads` alone and so never
pays for pandas and the preprocessing code.
"""
