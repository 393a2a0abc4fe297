"""The tiny seeded data set the transformers Trainer tests train on, here
once for tests/python/test_transformers_trainer.py and
tests/pinned/optimum_worker.py (which compare training on the hpu and on
the CPU, so both must see the same data). Only torch is imported: the
optimum worker runs it in a pinned environment."""
import torch


def parity_dataset(n, seed, seq=16, vocab=100):
    """n random token sequences of ids from 5 to vocab - 1, each with a
    learnable label: the parity of the second token."""
    class Data(torch.utils.data.Dataset):
        def __init__(self):
            g = torch.Generator().manual_seed(seed)
            self.ids = torch.randint(5, vocab, (n, seq), generator=g)
            self.labels = self.ids[:, 1] % 2

        def __len__(self):
            return n

        def __getitem__(self, i):
            return {"input_ids": self.ids[i], "attention_mask": torch.ones(seq, dtype=torch.long),
                    "labels": self.labels[i]}

    return Data()
