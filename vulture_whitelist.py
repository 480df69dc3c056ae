"""What make lint's dead-code check (vulture, [tool.vulture] in pyproject.toml) cannot see
used, each with who uses it. Never executed; vulture reads the names."""

# mdcr
__getattr__  # mdcr/__init__.py: the API's lazy attributes (PEP 562), called by Python
_.to_frame  # mdcr/evaluation/result.py: EvaluationResult.to_frame, the public API's frame
_.useFloat16  # mdcr/index/backends.py: a Faiss GPU cloner option, read by Faiss
_.exclude_ids  # mdcr/pools/build.py: a config field, read by name (core.config.inputs_of)
_.undefined  # mdcr/explore/app.py: Jinja's environment option, read by Jinja

# tests and scripts
_.binary_location  # explore's browser test and screenshot script: read by selenium
_.SciBERT, _.Specter, _.SciNCL, _.AspireBM, _.AspireCS  # fake_encoders: py: specs by name
_.SaysYes  # tests/integration/benchmark/plain_encoders.py: a py: spec by name
_.add_or_fail  # tests/integration/ray_helpers.py: imported by a script Ray's workers run
_.worker_and_state  # the same
_.log_message, _.do_GET  # release_server.py: http.server's handler hooks
_.close_connection, _.daemon_threads  # release_server.py: read by http.server
_.flavour  # test_facts.py: a fact, read by Facts through its dataclass fields
_.twice, _.post  # test_in_memory_identity.py: state the digest walks
_.base_model  # test_evaluate_names.py: a model card's field, read by mdcr.encoders.naming
ranx_ready  # tests/integration/scoring/conftest.py: a fixture asked for before a session fixture
