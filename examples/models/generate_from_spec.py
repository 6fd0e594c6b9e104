#!/usr/bin/env python3
"""Writes one dmlrun model per test vector of the spec's examples.md.

usage: generate_from_spec.py docs/spec/examples.md [output directory]

Each model binds the vector's inputs, dispatches the operator, prints every
output and checks it with an `expect` command using the vector's tolerance.
Outputs start as NaN (UINT32: 0xFFFFFFFF), so that an element the operator
does not write fails its expect. The models are committed; run this again
only when the vectors change.
"""
import json
import os
import re
import sys


def resource_name(field):
    """InputTensor -> input, OutputIndicesTensor -> outputIndices, ROITensor -> roi."""
    base = field[:-len("Tensor")] if field.endswith("Tensor") else field
    if base.isupper():
        return base.lower()
    return base[0].lower() + base[1:]


def tensor_desc(tensor):
    return {"DataType": tensor["type"], "Sizes": tensor["sizes"]}


def element_count(sizes):
    count = 1
    for size in sizes:
        count *= size
    return count


def output_resource(tensor):
    count = element_count(tensor["sizes"])
    poison = "nan" if tensor["type"].startswith("FLOAT") else 4294967295
    return {"initialValuesDataType": tensor["type"], "initialValues": {"valueCount": count, "value": poison}}


def input_resource(tensor):
    return {"initialValuesDataType": tensor["type"], "initialValues": tensor["data"]}


def expect(resource, values, tolerance):
    command = {"type": "expect", "resource": resource, "values": values}
    if tolerance.get("abs", 0):
        command["absoluteTolerance"] = tolerance["abs"]
    if tolerance.get("rel", 0):
        command["relativeTolerance"] = tolerance["rel"]
    return command


class Model:
    def __init__(self, vector):
        self.description = "%s (%s): %s" % (vector["id"], vector["provenance"], vector["title"])
        self.resources = {}
        self.dispatchables = {}
        self.commands = []

    def add_inputs(self, inputs):
        for field, tensor in inputs.items():
            if tensor is not None:
                self.resources[resource_name(field)] = input_resource(tensor)

    def dispatch(self, name, operator, desc, bindings, outputs, tolerance):
        """outputs: list of (field, resource, tensor, expected values)."""
        self.dispatchables[name] = {"type": operator, "desc": desc}
        self.commands.append({"type": "dispatch", "dispatchable": name, "bindings": bindings})
        for field, resource, tensor, expected in outputs:
            self.resources[resource] = output_resource(tensor)
            bindings[field] = resource
            self.commands.append({"type": "print", "resource": resource})
            self.commands.append(expect(resource, expected, tolerance))

    def json(self):
        return {"description": self.description, "resources": self.resources,
                "dispatchables": self.dispatchables, "commands": self.commands}


def simple_model(vector, operator=None, drop_params=(), output_names=None):
    """One dispatch of the vector's operator with its inputs and outputs."""
    model = Model(vector)
    model.add_inputs(vector["inputs"])
    operator = operator or vector["operator"]
    desc, bindings = {}, {}
    for field, tensor in vector["inputs"].items():
        desc[field] = None if tensor is None else tensor_desc(tensor)
        if tensor is not None:
            bindings[field] = resource_name(field)
    outputs = []
    for field, tensor in vector["outputs"].items():
        desc[field] = None if tensor is None else tensor_desc(tensor)
        if tensor is not None:
            outputs.append((field, resource_name(field), tensor, tensor["data"]))
    for key, value in vector["params"].items():
        if key not in drop_params:
            desc[key] = value
    model.dispatch(vector["id"].lower().replace("-", ""), operator, desc, bindings, outputs, vector["tolerance"])
    return model


def ra8_model(vector):
    """ReductionFunction is a list: one dispatch per reduction."""
    model = Model(vector)
    model.add_inputs(vector["inputs"])
    for reduction in vector["params"]["ReductionFunction"]:
        short = reduction.replace("DML_REDUCE_FUNCTION_", "")
        tensor = vector["outputs"]["OutputTensor(%s)" % short]
        desc = {field: tensor_desc(t) for field, t in vector["inputs"].items()}
        desc["OutputTensor"] = tensor_desc(tensor)
        desc.update(vector["params"])
        desc["ReductionFunction"] = reduction
        bindings = {field: resource_name(field) for field in vector["inputs"]}
        model.dispatch(short.lower(), vector["operator"], desc, bindings,
                       [("OutputTensor", "output_" + short.lower(), tensor, tensor["data"])], vector["tolerance"])
    return model


def ra9_model(vector):
    """Forward ROI_ALIGN1, then ROI_ALIGN_GRAD with both gradients."""
    model = Model(vector)
    inputs = vector["inputs"]
    model.add_inputs(inputs)
    forward_fields = ["InputTensor", "ROITensor", "BatchIndicesTensor"]
    forward = vector["outputs"]["OutputTensor (forward)"]
    desc = {field: tensor_desc(inputs[field]) for field in forward_fields}
    desc["OutputTensor"] = tensor_desc(forward)
    desc.update(vector["params"])
    model.dispatch("forward", "DML_OPERATOR_ROI_ALIGN1", desc, {f: resource_name(f) for f in forward_fields},
                   [("OutputTensor", "output", forward, forward["data"])], vector["tolerance"])
    grad_fields = ["InputTensor", "InputGradientTensor", "ROITensor", "BatchIndicesTensor"]
    desc = {field: tensor_desc(inputs[field]) for field in grad_fields}
    outputs = []
    for field in ["OutputGradientTensor", "OutputROIGradientTensor"]:
        tensor = vector["outputs"][field]
        desc[field] = tensor_desc(tensor)
        outputs.append((field, resource_name(field), tensor, tensor["data"]))
    desc.update({k: v for k, v in vector["params"].items() if k != "OutOfBoundsInputValue"})
    model.dispatch("gradient", "DML_OPERATOR_ROI_ALIGN_GRAD", desc, {f: resource_name(f) for f in grad_fields},
                   outputs, vector["tolerance"])
    return model


def bn6_model(vector):
    """One inference batch normalization per fused activation."""
    model = Model(vector)
    model.add_inputs(vector["inputs"])
    output = vector["outputs"]["OutputTensor"]
    for case in output["cases"]:
        activation = case["FusedActivation"]
        short = activation["Type"].replace("DML_OPERATOR_ACTIVATION_", "").lower()
        desc = {field: tensor_desc(t) for field, t in vector["inputs"].items()}
        desc["OutputTensor"] = {"DataType": output["type"], "Sizes": output["sizes"]}
        desc.update(vector["params"])
        desc["FusedActivation"] = activation
        bindings = {field: resource_name(field) for field in vector["inputs"]}
        tensor = {"type": output["type"], "sizes": output["sizes"]}
        model.dispatch(short, vector["operator"], desc, bindings,
                       [("OutputTensor", "output_" + short, tensor, case["expected"])], vector["tolerance"])
    return model


def max_pooling_v0_model(mp1):
    """MAX_POOLING (no indices, no dilations), derived from MP-1."""
    vector = dict(mp1)
    vector["id"] = "MP-1"
    vector["title"] = "MAX_POOLING (the first version: no indices, no dilations) on MP-1's input"
    vector["provenance"] = "derived from MP-1"
    vector["outputs"] = {"OutputTensor": mp1["outputs"]["OutputTensor"]}
    return simple_model(vector, "DML_OPERATOR_MAX_POOLING", drop_params=("Dilations",))


def format_json(value, indent=0):
    """json.dumps with indentation, but arrays of scalars on one line."""
    pad = " " * indent
    if isinstance(value, (dict, list)) and len(json.dumps(value)) + indent <= 100:
        return json.dumps(value)
    if isinstance(value, dict):
        if not value:
            return "{}"
        items = ['%s    %s: %s' % (pad, json.dumps(k), format_json(v, indent + 4)) for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value):
        items = [pad + "    " + format_json(v, indent + 4) for v in value]
        return "[\n" + ",\n".join(items) + "\n" + pad + "]"
    return json.dumps(value)


def main():
    spec = open(sys.argv[1]).read()
    out_dir = sys.argv[2] if len(sys.argv) > 2 else os.path.dirname(os.path.abspath(__file__))
    vectors = []
    for block in re.findall(r"```json\n(.*?)```", spec, re.S):
        data = json.loads(block)
        if isinstance(data, dict) and "operator" in data:
            vectors.append(data)
    models = {}
    for vector in vectors:
        key = vector["id"].lower().replace("-", "")
        if vector["id"] == "RA-8":
            models["roi_align1_" + key] = ra8_model(vector)
        elif vector["id"] == "RA-9":
            models["roi_align_grad_" + key] = ra9_model(vector)
        elif vector["id"] == "BN-6":
            models["batch_normalization_" + key] = bn6_model(vector)
        else:
            operator = vector["operator"].replace("DML_OPERATOR_", "").lower()
            models[operator + "_" + key] = simple_model(vector)
        if vector["id"] == "MP-1":
            models["max_pooling_mp1"] = max_pooling_v0_model(vector)
    for name, model in sorted(models.items()):
        with open(os.path.join(out_dir, name + ".json"), "w") as f:
            f.write(format_json(model.json()) + "\n")
    print("wrote %d models to %s" % (len(models), out_dir))


if __name__ == "__main__":
    main()
