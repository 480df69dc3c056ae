"""Encoders: what an encoder is (:mod:`.base`), how a spec finds one (:mod:`.registry`, its
records and families), what identifies it in a fingerprint (:mod:`.identity`,
:mod:`.state_digest`, :mod:`.probe`), the fast forward pass and its feed, and the
``encode`` stage writing float16 embedding stores (:mod:`.stage`, :mod:`.store`). The
models themselves are :mod:`.models`, each imported only when an encoder is built."""
