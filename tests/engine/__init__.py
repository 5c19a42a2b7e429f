"""The engine: placement, feasibility, scoring, fragmentation, queues, the snapshot,
`gangplace` demo/report/place."""
