"""One process of a Hugging Face Trainer job run under torch.distributed
(gloo, CPU; the Trainer sets the process group up from RANK, WORLD_SIZE,
MASTER_ADDR and MASTER_PORT), checkpointing through
ckptfs.huggingface.CkptfsCallback; started by ranks.py.

Usage: hf_main.py train JSON_ARGS. The model is a GPT-2 of two small layers
built from a config (no download): about 0.4 M parameters, so a checkpoint
is about 5 MiB with Adam's state.
"""

import hashlib
import os
import warnings

from framework_support import rank_main

import torch  # noqa: E402
from transformers import (GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback,  # noqa: E402
                          TrainingArguments)
from transformers.utils import logging as hf_logging  # noqa: E402

from ckptfs.huggingface import CkptfsCallback  # noqa: E402


class Tokens(torch.utils.data.Dataset):
    def __init__(self, n=64, length=16):
        g = torch.Generator().manual_seed(5)
        self.ids = torch.randint(0, 256, (n, length), generator=g)

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


def params_digest(model):
    h = hashlib.sha256()
    for name, p in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(p.detach().contiguous().view(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


class Watch(TrainerCallback):
    """Records the step training starts from (after a resume) and the
    weights then, and every checkpoint's state right after on_save."""

    def __init__(self):
        self.first_step = None
        self.first_digest = None
        self.after_save = {}

    def on_step_begin(self, args, state, control, model=None, **kwargs):
        if self.first_step is None:
            self.first_step = state.global_step
            self.first_digest = params_digest(model)

    def on_save(self, args, state, control, **kwargs):
        import ckptfs
        path = os.path.join(args.output_dir, "checkpoint-%d" % state.global_step)
        self.after_save[state.global_step] = ckptfs.state(path)


def scenario_train(rank, world, args):
    hf_logging.set_verbosity_error()
    config = GPT2Config(vocab_size=256, n_positions=16, n_embd=128, n_layer=2, n_head=2)
    torch.manual_seed(0)
    model = GPT2LMHeadModel(config)
    best = args.get("save_strategy") == "best"
    training = TrainingArguments(
        output_dir=args["run"], max_steps=args["max_steps"], save_steps=args.get("save_steps"),
        save_strategy=args.get("save_strategy", "steps"),
        eval_strategy="steps" if best else "no", eval_steps=args.get("eval_steps"),
        metric_for_best_model="eval_loss" if best else None,
        save_total_limit=args.get("save_total_limit"), per_device_train_batch_size=4,
        learning_rate=args.get("learning_rate", 1e-3), use_cpu=True, ddp_backend="gloo",
        report_to="none", logging_strategy="no", disable_tqdm=True, dataloader_num_workers=0,
        seed=0)
    watch = Watch()
    trainer = Trainer(model=model, args=training, train_dataset=Tokens(),
                      eval_dataset=Tokens(n=8) if best else None,
                      callbacks=[CkptfsCallback(), watch])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.train(resume_from_checkpoint=args.get("resume"))
    return {"first_step": watch.first_step, "first_digest": watch.first_digest,
            "global_step": trainer.state.global_step, "digest": params_digest(model),
            "after_save": watch.after_save, "world_size": training.world_size,
            "best_model_checkpoint": trainer.state.best_model_checkpoint,
            "process_index": training.process_index}


def main():
    rank_main({"train": scenario_train})


if __name__ == "__main__":
    main()
