"""The single-file formats training jobs use, through a ckptfs mount:
torch.save / torch.load (plain, weights_only=True, mmap=True) and
safetensors (save_file / load_file / safe_open, which maps the file), each
loading back bit-exact."""

import os

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file


def sample_state():
    g = torch.Generator().manual_seed(17)
    return {
        "embed.weight": torch.randn(1531, 1024, generator=g),  # ~6 MiB: several chunks
        "layer0.weight": torch.randn(333, 517, generator=g).to(torch.bfloat16),
        "layer0.bias": torch.randn(7, generator=g).half(),
        "ids": torch.arange(100003, dtype=torch.int64),
        "mask": torch.rand(999, generator=g) > 0.5,
        "q": torch.randint(-128, 127, (4096, 33), generator=g, dtype=torch.int8),
        "step": torch.tensor(1000),
        "empty": torch.empty(0, 3),
    }


def assert_bit_exact(expected, got):
    assert expected.keys() == got.keys()
    for key, value in expected.items():
        other = got[key]
        assert other.dtype == value.dtype and other.shape == value.shape, key
        assert torch.equal(other.contiguous().reshape(-1).view(torch.uint8),
                           value.contiguous().reshape(-1).view(torch.uint8)), key


def test_torch_save_then_load_every_way(run_dir):
    state = sample_state()
    path = os.path.join(run_dir, "rank_00017.pt")
    torch.save(state, path)
    assert_bit_exact(state, torch.load(path))
    assert_bit_exact(state, torch.load(path, weights_only=True))
    mapped = torch.load(path, mmap=True, weights_only=True)
    assert_bit_exact(state, mapped)
    # Still right after the file is read again through another open.
    with open(path, "rb") as f:
        assert len(f.read()) == os.path.getsize(path)
    assert_bit_exact(state, mapped)


def test_torch_save_of_a_nested_training_state_with_weights_only(run_dir):
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 8))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(torch.randn(4, 64)).sum().backward()
    optimizer.step()
    state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": 5}
    path = os.path.join(run_dir, "train_state.pt")
    torch.save(state, path)
    back = torch.load(path, weights_only=True, mmap=True)
    assert_bit_exact(state["model"], back["model"])
    assert back["step"] == 5
    assert back["optimizer"]["param_groups"] == state["optimizer"]["param_groups"]
    for index, slot in state["optimizer"]["state"].items():
        assert_bit_exact(slot, back["optimizer"]["state"][index])


def test_safetensors_save_then_load_and_safe_open(run_dir):
    state = {k: v for k, v in sample_state().items() if k != "empty"}
    state["empty"] = torch.empty(0, 3)
    path = os.path.join(run_dir, "model.safetensors")
    save_file(state, path, metadata={"format": "pt"})
    assert_bit_exact(state, load_file(path))
    with safe_open(path, framework="pt") as f:
        assert f.metadata() == {"format": "pt"}
        got = {key: f.get_tensor(key) for key in f.keys()}
        assert_bit_exact(state, got)
        part = f.get_slice("embed.weight")[100:200]
        assert torch.equal(part, state["embed.weight"][100:200])
