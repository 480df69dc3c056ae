"""Run in an environment with the `adapters` library (transformers ~=4.57.6): build a tiny
BERT and a tiny sequential bottleneck (seq_bn) adapter with random weights, save both, and
write the CLS vectors the library computes for some papers (title [SEP] abstract).

Usage: python make_reference.py BASE_DIR ADAPTER_DIR OUT_NPY TEXTS_JSON
"""

import json
import sys

import numpy as np
import torch
from adapters import AutoAdapterModel
from transformers import BertConfig, BertModel, BertTokenizer

base_dir, adapter_dir, out_npy, texts_json = sys.argv[1:5]
words = ["the", "a", "of", "cell", "gene", "protein", "graph", "citation", "query", "paper"]
vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ",", *words]
vocab += [f"w{i}" for i in range(60 - len(vocab))]
with open(f"{base_dir}/vocab.txt", "w") as f:
    f.write("\n".join(vocab) + "\n")
torch.manual_seed(0)
config = BertConfig(
    vocab_size=len(vocab),
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=2,
    intermediate_size=64,
    max_position_embeddings=128,
)
BertModel(config).save_pretrained(base_dir)
tokenizer = BertTokenizer(f"{base_dir}/vocab.txt")
tokenizer.save_pretrained(base_dir)

model = AutoAdapterModel.from_pretrained(base_dir)
model.add_adapter("prx", config="seq_bn")
torch.manual_seed(1)
with torch.no_grad():
    for name, p in model.named_parameters():
        if ".adapters." in name:
            p.normal_(0.0, 0.3)  # the library starts near identity; make it count
model.set_active_adapters("prx")
model.save_adapter(adapter_dir, "prx")
model.eval()

with open(texts_json) as f:
    papers = json.load(f)
texts = [t + tokenizer.sep_token + a for t, a in papers]
inputs = tokenizer(
    texts,
    padding=True,
    truncation=True,
    max_length=64,
    return_tensors="pt",
    return_token_type_ids=False,
)
with torch.no_grad():
    output = model(**inputs)
np.save(out_npy, output.last_hidden_state[:, 0, :].numpy())
