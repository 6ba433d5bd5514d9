"""Developer tools, not the library: the ONNX conformance runner, the MLP cost model's training-set CLI and the
by-turns harness the search-efficiency benchmark runs two tunings with. Nothing in `tilegrad` imports them."""
