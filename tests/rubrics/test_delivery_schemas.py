from rubrics.delivery.schema_gen import main


def test_committed_schemas_match_the_models(capsys):
    assert main(["--check"]) == 0, capsys.readouterr().err
